package adapters

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/store"
)

// Errors of [OpenBroker] and [OpenStore], for errors.Is.
var (
	// ErrUnknownScheme is returned for a URL whose scheme no adapter
	// handles, or that has no scheme.
	ErrUnknownScheme = errors.New("adapters: unknown scheme")
	// ErrBadURL is returned for a URL that names a known adapter but that
	// the adapter cannot use: a missing host or path, a bad parameter.
	ErrBadURL = errors.New("adapters: bad URL")
)

// Options configures [OpenBroker] and [OpenStore]. A nil *Options means the
// defaults.
type Options struct {
	// Logger is given to the adapters that take one. Default: discard.
	Logger *slog.Logger
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// brokerOpener opens a broker from a parsed URL.
type brokerOpener func(ctx context.Context, u *parsed, o *Options) (calf.Broker, error)

// storeOpener opens a store from a parsed URL.
type storeOpener func(ctx context.Context, u *parsed, o *Options) (store.Store, error)

// OpenBroker opens the broker that rawURL names (see the package
// documentation for the schemes). Close the broker when done.
func OpenBroker(ctx context.Context, rawURL string, opts *Options) (calf.Broker, error) {
	u, err := parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", Redact(rawURL), err)
	}
	open, ok := brokerSchemes[u.scheme]
	if !ok {
		return nil, fmt.Errorf("broker %s: %w %q: known schemes: %s", u.redacted, ErrUnknownScheme, u.scheme, strings.Join(BrokerSchemes(), ", "))
	}
	b, err := open(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", u.redacted, u.scrub(err))
	}
	return b, nil
}

// OpenStore opens the state store that rawURL names (see the package
// documentation for the schemes). Close the store when done.
func OpenStore(ctx context.Context, rawURL string, opts *Options) (store.Store, error) {
	u, err := parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", Redact(rawURL), err)
	}
	open, ok := storeSchemes[u.scheme]
	if !ok {
		return nil, fmt.Errorf("store %s: %w %q: known schemes: %s", u.redacted, ErrUnknownScheme, u.scheme, strings.Join(StoreSchemes(), ", "))
	}
	s, err := open(ctx, u, opts)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", u.redacted, u.scrub(err))
	}
	return s, nil
}

// CheckBrokerURL reports whether rawURL names a known broker scheme,
// without opening anything: [ErrUnknownScheme] or nil.
func CheckBrokerURL(rawURL string) error {
	u, err := parse(rawURL)
	if err != nil {
		return fmt.Errorf("broker %s: %w", Redact(rawURL), err)
	}
	if _, ok := brokerSchemes[u.scheme]; !ok {
		return fmt.Errorf("broker %s: %w %q: known schemes: %s", u.redacted, ErrUnknownScheme, u.scheme, strings.Join(BrokerSchemes(), ", "))
	}
	return nil
}

// CheckStoreURL reports whether rawURL names a known store scheme, without
// opening anything: [ErrUnknownScheme] or nil.
func CheckStoreURL(rawURL string) error {
	u, err := parse(rawURL)
	if err != nil {
		return fmt.Errorf("store %s: %w", Redact(rawURL), err)
	}
	if _, ok := storeSchemes[u.scheme]; !ok {
		return fmt.Errorf("store %s: %w %q: known schemes: %s", u.redacted, ErrUnknownScheme, u.scheme, strings.Join(StoreSchemes(), ", "))
	}
	return nil
}

// BrokerSchemes returns the schemes [OpenBroker] knows, sorted.
func BrokerSchemes() []string { return sortedKeys(brokerSchemes) }

// StoreSchemes returns the schemes [OpenStore] knows, sorted.
func StoreSchemes() []string { return sortedKeys(storeSchemes) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// InProcess reports whether rawURL names a broker that only the process
// that opens it can reach: memory:// and nats+embedded://. Handlers for
// such a broker must run in that process.
func InProcess(rawURL string) bool {
	u, err := parse(rawURL)
	return err == nil && (u.scheme == "memory" || u.scheme == "nats+embedded")
}

// parsed is a URL split the way the table needs it.
type parsed struct {
	raw      string
	redacted string
	scheme   string
	// rest is everything after "scheme:", for the schemes whose location
	// is a path (sqlite:, nats+embedded:, memory:).
	rest string
	// url is the parsed URL, for the schemes with hosts.
	url *url.URL
	// secrets are the URL's password and the values of its secretParams,
	// scrubbed from errors.
	secrets []string
}

// parse splits rawURL into its scheme and the rest. Only the scheme is
// checked here; each adapter checks the rest.
func parse(rawURL string) (*parsed, error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: no scheme: want SCHEME:..., as in memory:// or nats://127.0.0.1:4222", ErrUnknownScheme)
	}
	p := &parsed{raw: rawURL, redacted: Redact(rawURL), scheme: strings.ToLower(scheme), rest: rest}
	if u, err := url.Parse(rawURL); err == nil {
		p.url = u
		if pw, ok := u.User.Password(); ok && pw != "" {
			p.secrets = append(p.secrets, pw)
		}
		q := u.Query()
		for _, k := range secretParams {
			for _, v := range q[k] {
				if v != "" {
					p.secrets = append(p.secrets, v)
				}
			}
		}
	} else if i := strings.LastIndex(rest, "@"); i >= 0 {
		// An unparsable URL may still hold a password: scrub user info.
		if _, pw, ok := strings.Cut(strings.TrimPrefix(rest[:i], "//"), ":"); ok && pw != "" {
			p.secrets = append(p.secrets, pw)
		}
	}
	return p, nil
}

// needURL returns the parsed URL, or the parse error as [ErrBadURL].
func (p *parsed) needURL() (*url.URL, error) {
	if p.url != nil {
		return p.url, nil
	}
	_, err := url.Parse(p.raw)
	return nil, fmt.Errorf("%w: %s", ErrBadURL, p.scrubText(errors.Unwrap(err).Error()))
}

// secretParams are the query parameters whose values are secrets (libpq's
// password and sslpassword).
var secretParams = []string{"password", "sslpassword"}

// scrub returns err with the URL's secrets replaced in its text.
func (p *parsed) scrub(err error) error {
	text := p.scrubText(err.Error())
	if text == err.Error() {
		return err
	}
	return &scrubbedError{err: err, text: text}
}

func (p *parsed) scrubText(s string) string {
	for _, secret := range p.secrets {
		s = strings.ReplaceAll(s, secret, "xxxxx")
		if esc := url.QueryEscape(secret); esc != secret {
			s = strings.ReplaceAll(s, esc, "xxxxx")
		}
	}
	return s
}

// scrubbedError is an error whose text had a password replaced.
type scrubbedError struct {
	err  error
	text string
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// Redact returns rawURL with its password, if any, and the values of its
// password and sslpassword query parameters replaced by "xxxxx", for logs
// and errors.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err == nil {
		_, hasPassword := u.User.Password()
		q := u.Query()
		inQuery := false
		for _, k := range secretParams {
			if q.Has(k) {
				q.Set(k, "xxxxx")
				inQuery = true
			}
		}
		if !hasPassword && !inQuery {
			return rawURL
		}
		if inQuery {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	// Unparsable: drop whatever stands between "//" and "@".
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return rawURL
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		if user, _, ok := strings.Cut(rest[:i], ":"); ok {
			return scheme + "://" + user + ":xxxxx" + rest[i:]
		}
	}
	return rawURL
}
