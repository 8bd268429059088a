package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"

	"github.com/calf-go/calf/tool"
)

// Defaults of [FetchOptions].
const (
	DefaultFetchTimeout      = 30 * time.Second
	DefaultMaxFetchBytes     = 2 << 20
	DefaultMaxFetchTextBytes = 64 << 10
	DefaultMaxRedirects      = 5
)

// ErrForbiddenAddress is returned by web_fetch for a URL whose host is, or
// resolves to, an address the tool may not reach: loopback, private,
// link-local (cloud metadata services among them), multicast, unspecified
// or reserved, unless [FetchOptions.Allow] lists it. An IPv6 address is
// public only in 2000::/3 and outside its special ranges, so the IPv6 forms
// that embed an IPv4 address (IPv4-compatible, IPv4-translated, 6to4,
// Teredo) are refused whatever they embed; an IPv4-mapped address, and a
// NAT64 address of the well-known prefix 64:ff9b::/96, is checked as the
// IPv4 address it embeds. The check is made on
// the address each connection goes to, after DNS resolution and on every
// redirect, so a name that resolves to such an address, or a public URL
// that redirects to one, is refused too.
var ErrForbiddenAddress = errors.New("the address is not one web_fetch may reach")

// FetchOptions configure the web_fetch tool. The zero value, like a nil
// *FetchOptions, means the defaults.
type FetchOptions struct {
	// Timeout bounds a fetch, redirects and body included. Default
	// [DefaultFetchTimeout].
	Timeout time.Duration
	// MaxBytes bounds the body read from the server; a longer body is cut.
	// Default [DefaultMaxFetchBytes].
	MaxBytes int
	// MaxTextBytes bounds the text returned to the model, after HTML is
	// turned into Markdown. Default [DefaultMaxFetchTextBytes].
	MaxTextBytes int
	// MaxRedirects bounds the redirects followed. Default
	// [DefaultMaxRedirects].
	MaxRedirects int
	// Allow lists the address ranges the tool may reach although they are
	// loopback, private or otherwise forbidden: a service on the local
	// network, say. Default none.
	Allow []netip.Prefix
	// UserAgent is the User-Agent header. Default "calf-web-fetch".
	UserAgent string
}

type fetchArgs struct {
	URL string `json:"url" jsonschema:"the http or https URL to fetch"`
}

type fetcher struct {
	opts   FetchOptions
	client *http.Client
}

// WebFetch returns the web_fetch tool, which GETs an http or https URL and
// returns the page as text: HTML turned into Markdown, text and JSON as
// they are, other content refused. It is of kind [tool.KindNetwork]. It
// reaches only public addresses (see [ErrForbiddenAddress]), follows at
// most opts.MaxRedirects redirects, each checked the same way, ignores the
// process's proxy settings, and bounds the time, the bytes read and the
// text returned.
func WebFetch(opts *FetchOptions) (tool.Tool, error) {
	var o FetchOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultFetchTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxFetchBytes
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxFetchTextBytes
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.UserAgent == "" {
		o.UserAgent = "calf-web-fetch"
	}
	for _, p := range o.Allow {
		if !p.IsValid() {
			return nil, fmt.Errorf("builtin: web_fetch: invalid prefix %v in Allow", p)
		}
	}
	f := &fetcher{opts: o}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: f.checkDial}
	f.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // a proxy would connect for us, past the check
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: o.Timeout,
			MaxIdleConns:          16,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > o.MaxRedirects {
				return fmt.Errorf("more than %d redirects", o.MaxRedirects)
			}
			return checkURL(req.URL)
		},
	}
	desc := fmt.Sprintf("Fetch a web page (http or https, GET) and return it as text: HTML as Markdown, "+
		"at most %d bytes. Only public addresses can be fetched.", o.MaxTextBytes)
	return classify(tool.KindNetwork)(tool.New("web_fetch", desc, f.fetch))
}

// checkURL refuses what is not a plain http or https URL.
func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("only http and https URLs can be fetched, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("the URL has no host")
	}
	return nil
}

// checkDial refuses a connection to a forbidden address; it runs for every
// connection, once the name is resolved.
func (f *fetcher) checkDial(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrForbiddenAddress, host)
	}
	ip = ip.Unmap().WithZone("")
	// What a NAT64 gateway connects to is the IPv4 address inside.
	target := ip
	if nat64.Contains(ip) {
		b := ip.As16()
		target = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range f.opts.Allow {
		if p.Contains(ip) || p.Contains(target) {
			return nil
		}
	}
	if forbidden(target) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ip)
	}
	return nil
}

// nat64 is the well-known prefix of IPv4/IPv6 translation (RFC 6052): an
// address in it stands for the IPv4 address of its last 32 bits, which
// the gateway connects to, and is checked as that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// globalUnicast6 is the only IPv6 range with public unicast addresses
// (RFC 4291); everything outside it is refused: loopback, unspecified,
// IPv4-compatible (::/96) and IPv4-translated (::ffff:0:0:0/96) forms,
// discard-only (100::/64), local-use translation (64:ff9b:1::/48),
// segment routing (5f00::/16), unique-local (fc00::/7), site-local
// (fec0::/10), link-local (fe80::/10) and multicast (ff00::/8).
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// reserved are the ranges, besides those netip classifies and those
// outside [globalUnicast6], that are not public: for IPv4, this network,
// shared address space (CGNAT), IETF protocol assignments, documentation,
// benchmarking, and the reserved class E; for IPv6, the IETF protocol
// assignments (Teredo, which embeds an IPv4 address, benchmarking,
// ORCHID among them), 6to4, which embeds an IPv4 address, and the
// documentation prefixes.
var reserved = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "100.64.0.0/10", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
		"2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// forbidden reports whether ip is not a public unicast address.
func forbidden(ip netip.Addr) bool {
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || !ip.IsGlobalUnicast() {
		return true
	}
	if ip.Is6() && !globalUnicast6.Contains(ip) {
		return true
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (f *fetcher) fetch(ctx context.Context, in fetchArgs) (string, error) {
	u, err := url.Parse(strings.TrimSpace(in.URL))
	if err != nil {
		return "", fmt.Errorf("the URL does not parse: %v", err)
	}
	if err := checkURL(u); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", f.opts.UserAgent)
	req.Header.Set("Accept", "text/html, text/plain, text/markdown, application/json;q=0.9, */*;q=0.1")
	resp, err := f.client.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.Is(err, ErrForbiddenAddress) && errors.As(err, &oe) {
			return "", fmt.Errorf("fetching %s: %w", redact(u), oe.Err)
		}
		// The transport's wait for the headers (as long as the fetch's)
		// may run out just before the fetch's own deadline.
		var ne net.Error
		if ctx.Err() == context.DeadlineExceeded || errors.As(err, &ne) && ne.Timeout() {
			return "", fmt.Errorf("fetching %s: no answer within %s", redact(u), f.opts.Timeout)
		}
		return "", fmt.Errorf("fetching %s: %v", redact(u), unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(f.opts.MaxBytes)+1))
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return "", fmt.Errorf("fetching %s: the body did not arrive within %s", redact(u), f.opts.Timeout)
		}
		return "", fmt.Errorf("reading %s: %v", redact(u), err)
	}
	cut := len(body) > f.opts.MaxBytes
	if cut {
		body = body[:f.opts.MaxBytes]
	}
	final := resp.Request.URL
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mediaType == "" {
		mediaType = http.DetectContentType(body)
		mediaType, _, _ = mime.ParseMediaType(mediaType)
	}
	var text string
	switch {
	case mediaType == "text/html" || mediaType == "application/xhtml+xml":
		md, err := htmltomarkdown.ConvertString(string(body), converter.WithDomain(final.Scheme+"://"+final.Host))
		if err != nil {
			return "", fmt.Errorf("turning the page of %s into text: %v", redact(final), err)
		}
		text = md
	case strings.HasPrefix(mediaType, "text/") || mediaType == "application/json" || strings.HasSuffix(mediaType, "+json") ||
		mediaType == "application/xml" || strings.HasSuffix(mediaType, "+xml"):
		if !utf8.Valid(body) && !cut {
			return "", fmt.Errorf("%s answered %s that is not UTF-8 text", redact(final), mediaType)
		}
		text = strings.ToValidUTF8(string(body), "\uFFFD")
	default:
		return "", fmt.Errorf("%s answered %s content (%s), which web_fetch does not turn into text", redact(final), mediaType, resp.Status)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "URL: %s\nStatus: %s\n", redact(final), resp.Status)
	if cut {
		fmt.Fprintf(&sb, "[the body was cut at %d bytes]\n", f.opts.MaxBytes)
	}
	sb.WriteString("\n")
	if len(text) > f.opts.MaxTextBytes {
		end := f.opts.MaxTextBytes
		for end > 0 && !utf8.RuneStart(text[end]) {
			end--
		}
		text = text[:end] + fmt.Sprintf("\n[the text goes on for %d more bytes]", len(text)-end)
	}
	sb.WriteString(text)
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("%s", sb.String())
	}
	return sb.String(), nil
}

// unwrapURLError returns the error a *url.Error wraps.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redact returns u without its user information, for the model and logs.
func redact(u *url.URL) string { return u.Redacted() }
