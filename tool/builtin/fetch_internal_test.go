package builtin

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

// Every address of a range that is not public is refused at dial time,
// IPv6 forms that embed an IPv4 address among them; public addresses, and
// NAT64 translations of public IPv4 addresses, are not.
func TestForbiddenAddresses(t *testing.T) {
	f := &fetcher{}
	for _, tt := range []struct {
		name      string
		addr      string
		forbidden bool
	}{
		{"IPv4 public", "8.8.8.8", false},
		{"IPv6 public", "2606:4700:4700::1111", false},
		{"IPv6 public, regional registry", "2001:200::1", false},
		{"IPv4 loopback", "127.0.0.1", true},
		{"IPv4 private", "10.1.2.3", true},
		{"IPv4 link-local, metadata", "169.254.169.254", true},
		{"IPv4 this network", "0.1.2.3", true},
		{"IPv4 CGNAT", "100.64.0.1", true},
		{"IPv4 broadcast", "255.255.255.255", true},
		{"IPv4 multicast", "224.0.0.1", true},
		{"IPv6 unspecified", "::", true},
		{"IPv6 loopback", "::1", true},
		{"IPv4-compatible loopback", "::127.0.0.1", true},
		{"IPv4-compatible private", "::10.0.0.1", true},
		{"IPv4-compatible public", "::8.8.8.8", true},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", true},
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", true},
		{"IPv4-translated loopback", "::ffff:0:127.0.0.1", true},
		{"IPv4-translated private", "::ffff:0:10.0.0.1", true},
		{"IPv4/IPv6 translation, local use", "64:ff9b:1::7f00:1", true},
		{"NAT64 of loopback", "64:ff9b::127.0.0.1", true},
		{"NAT64 of private", "64:ff9b::10.0.0.1", true},
		{"NAT64 of metadata", "64:ff9b::169.254.169.254", true},
		{"NAT64 of public", "64:ff9b::8.8.8.8", false},
		{"discard-only", "100::1", true},
		{"Teredo", "2001::1", true},
		{"Teredo, embedding loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", true},
		{"IETF protocol assignments", "2001:2::1", true},
		{"ORCHIDv2", "2001:20::1", true},
		{"6to4 of loopback", "2002:7f00:1::1", true},
		{"6to4 of private", "2002:a00:1::1", true},
		{"6to4 of public", "2002:808:808::1", true},
		{"documentation", "2001:db8::1", true},
		{"documentation, 3fff::/20", "3fff::1", true},
		{"segment routing", "5f00::1", true},
		{"unique local", "fd00::1", true},
		{"unique local, fc00::/8", "fc00::1", true},
		{"site-local", "fec0::1", true},
		{"link-local", "fe80::1", true},
		{"link-local with zone", "fe80::1%eth0", true},
		{"multicast", "ff02::1", true},
		{"multicast, global", "ff0e::1", true},
		{"outside global unicast", "4000::1", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := f.checkDial("tcp", net.JoinHostPort(tt.addr, "80"), nil)
			if tt.forbidden && !errors.Is(err, ErrForbiddenAddress) {
				t.Errorf("dial to %s: %v, want %v", tt.addr, err, ErrForbiddenAddress)
			}
			if !tt.forbidden && err != nil {
				t.Errorf("dial to %s: %v, want it allowed", tt.addr, err)
			}
		})
	}
}

// Allow opens a range, and only that range.
func TestForbiddenAddressesAllow(t *testing.T) {
	f := &fetcher{opts: FetchOptions{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}}
	for addr, allowed := range map[string]bool{
		"10.1.2.3": true, "::ffff:10.1.2.3": true, "fd00::1": true,
		"127.0.0.1": false, "::127.0.0.1": false, "fc00::1": false,
	} {
		err := f.checkDial("tcp", net.JoinHostPort(addr, "80"), nil)
		if allowed != (err == nil) {
			t.Errorf("dial to %s with Allow: %v", addr, err)
		}
	}
}
