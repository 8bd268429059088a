package adapters

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/kafka"
	brokermemory "github.com/calf-go/calf/broker/memory"
	"github.com/calf-go/calf/broker/nats"
	"github.com/calf-go/calf/broker/nats/embedded"
	"github.com/calf-go/calf/store"
	storememory "github.com/calf-go/calf/store/memory"
	"github.com/calf-go/calf/store/postgres"
	"github.com/calf-go/calf/store/redis"
	"github.com/calf-go/calf/store/sqlite"
)

// brokerSchemes is the table of broker URL schemes. A scheme added here
// is accepted by OpenBroker.
var brokerSchemes = map[string]brokerOpener{
	// memory:// is the in-process broker.
	"memory": func(_ context.Context, u *parsed, o *Options) (calf.Broker, error) {
		if err := nothingAfter(u); err != nil {
			return nil, err
		}
		return brokermemory.New(&brokermemory.Options{Logger: o.logger()}), nil
	},
	// nats://[user:password@]HOST:PORT[,HOST:PORT...][?partitions=N&replicas=N&stream=NAME&prefix=TOKEN]
	"nats": func(ctx context.Context, u *parsed, o *Options) (calf.Broker, error) {
		h, err := parseHosts(u, "4222")
		if err != nil {
			return nil, err
		}
		no, err := natsOptions(h.query, o)
		if err != nil {
			return nil, err
		}
		servers := make([]string, len(h.hosts))
		for i, host := range h.hosts {
			servers[i] = "nats://" + host
		}
		// The credentials go in options, not in the URL, so that no error
		// of the NATS client can show them.
		if h.user != "" {
			if h.hasPassword {
				no.ConnectOptions = append(no.ConnectOptions, natsgo.UserInfo(h.user, h.password))
			} else {
				no.ConnectOptions = append(no.ConnectOptions, natsgo.Token(h.user))
			}
		}
		return nats.Open(ctx, strings.Join(servers, ","), no)
	},
	// kafka://HOST:PORT[,HOST:PORT...][?partitions=N&topic_prefix=P&...]
	"kafka": kafkaBroker,
	// nats+embedded://PATH (or nats+embedded:PATH) runs a NATS server in
	// this process with its file store in PATH.
	"nats+embedded": func(ctx context.Context, u *parsed, o *Options) (calf.Broker, error) {
		path, query, _ := strings.Cut(u.rest, "?")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, fmt.Errorf("%w: nats+embedded needs the directory of its file store: nats+embedded:///var/lib/calf/nats", ErrBadURL)
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("%w: query: %v", ErrBadURL, err)
		}
		no, err := natsOptions(q, o)
		if err != nil {
			return nil, err
		}
		return embedded.Open(ctx, path, no)
	},
}

// kafkaBroker opens kafka://HOST:PORT[,HOST:PORT...][?partitions=N&...]:
// broker/kafka's ParseURL reads the seeds and the parameters.
func kafkaBroker(ctx context.Context, u *parsed, o *Options) (calf.Broker, error) {
	h, err := parseHosts(u, "9092")
	if err != nil {
		return nil, err
	}
	if h.user != "" {
		return nil, fmt.Errorf("%w: kafka URLs take no credentials; configure SASL with kafka.Options.ClientOptions in a program of your own", ErrBadURL)
	}
	seeds, ko, err := kafka.ParseURL(u.raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	ko.Logger = o.logger()
	return kafka.Open(ctx, seeds, ko)
}

// natsOptions reads the query parameters of a nats URL.
func natsOptions(q url.Values, o *Options) (*nats.Options, error) {
	no := &nats.Options{Logger: o.logger()}
	for k := range q {
		switch k {
		case "partitions", "replicas", "stream", "prefix", "outage_budget":
		default:
			return nil, fmt.Errorf("%w: unknown parameter %q: known: outage_budget, partitions, prefix, replicas, stream", ErrBadURL, k)
		}
	}
	if v := q.Get("outage_budget"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%w: outage_budget=%q: want a positive duration such as 5m", ErrBadURL, v)
		}
		no.OutageBudget = d
	}
	n, err := intParam(q, "partitions")
	if err != nil {
		return nil, err
	}
	no.Partitions = n
	if no.Replicas, err = intParam(q, "replicas"); err != nil {
		return nil, err
	}
	no.Stream = q.Get("stream")
	no.Prefix = q.Get("prefix")
	return no, nil
}

// storeSchemes is the table of store URL schemes. A scheme added here is
// accepted by OpenStore.
var storeSchemes = map[string]storeOpener{
	// memory: keeps state in the process; it is gone when it exits.
	"memory": func(_ context.Context, u *parsed, _ *Options) (store.Store, error) {
		if err := nothingAfter(u); err != nil {
			return nil, err
		}
		return storememory.New(), nil
	},
	// sqlite:PATH, sqlite:///ABS/PATH; an empty PATH means sqlite.DefaultPath.
	"sqlite": func(_ context.Context, u *parsed, o *Options) (store.Store, error) {
		path := strings.TrimPrefix(u.rest, "//")
		if path == "" {
			var err error
			if path, err = sqlite.DefaultPath(); err != nil {
				return nil, err
			}
		}
		return sqlite.Open(path, &sqlite.Options{Logger: o.logger()})
	},
	// postgres://[user[:password]@]HOST[:PORT]/DBNAME[?...]
	"postgres":   openPostgres,
	"postgresql": openPostgres,
	// redis://[user:password@]HOST:PORT/DB; rediss:// for TLS.
	"redis":  openRedis,
	"rediss": openRedis,
}

func openPostgres(ctx context.Context, u *parsed, o *Options) (store.Store, error) {
	if _, err := u.needURL(); err != nil {
		return nil, err
	}
	return postgres.Open(ctx, u.raw, &postgres.Options{Logger: o.logger()})
}

func openRedis(ctx context.Context, u *parsed, o *Options) (store.Store, error) {
	pu, err := u.needURL()
	if err != nil {
		return nil, err
	}
	if pu.Host == "" {
		return nil, fmt.Errorf("%w: no host: want redis://HOST:PORT/DB", ErrBadURL)
	}
	return redis.Open(ctx, u.raw, &redis.Options{Logger: o.logger()})
}

// nothingAfter checks that a memory URL has nothing after its scheme.
func nothingAfter(u *parsed) error {
	if rest := strings.TrimPrefix(u.rest, "//"); rest != "" {
		return fmt.Errorf("%w: %s: takes nothing after the scheme, got %q", ErrBadURL, u.scheme, u.scrubText(u.rest))
	}
	return nil
}

// hostList is the authority of a URL that may name several hosts.
type hostList struct {
	user, password string
	hasPassword    bool
	hosts          []string // HOST:PORT
	query          url.Values
}

// parseHosts parses SCHEME://[user[:password]@]HOST[:PORT][,HOST[:PORT]...][/][?QUERY],
// giving each host defaultPort when it has none.
func parseHosts(u *parsed, defaultPort string) (*hostList, error) {
	rest, ok := strings.CutPrefix(u.rest, "//")
	if !ok {
		return nil, fmt.Errorf("%w: want %s://HOST:PORT[,HOST:PORT...]", ErrBadURL, u.scheme)
	}
	rest, query, _ := strings.Cut(rest, "?")
	rest = strings.TrimSuffix(rest, "/")
	if strings.Contains(rest, "/") {
		return nil, fmt.Errorf("%w: %s URLs take no path: want %s://HOST:PORT[,HOST:PORT...]", ErrBadURL, u.scheme, u.scheme)
	}
	h := &hostList{}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		info := rest[:i]
		rest = rest[i+1:]
		user, pw, hasPW := strings.Cut(info, ":")
		var err error
		if h.user, err = url.PathUnescape(user); err != nil {
			return nil, fmt.Errorf("%w: user name: %v", ErrBadURL, err)
		}
		if h.password, err = url.PathUnescape(pw); err != nil {
			return nil, fmt.Errorf("%w: password is not URL-encoded properly", ErrBadURL)
		}
		h.hasPassword = hasPW
	}
	if rest == "" {
		return nil, fmt.Errorf("%w: no host: want %s://HOST:PORT[,HOST:PORT...]", ErrBadURL, u.scheme)
	}
	for host := range strings.SplitSeq(rest, ",") {
		if host == "" {
			return nil, fmt.Errorf("%w: empty host in the list", ErrBadURL)
		}
		name, port, err := net.SplitHostPort(host)
		if err != nil {
			// No port: add the default one.
			name, port = strings.Trim(host, "[]"), defaultPort
		}
		if name == "" || strings.ContainsAny(name, " []") {
			return nil, fmt.Errorf("%w: bad host %q", ErrBadURL, host)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("%w: bad port in %q", ErrBadURL, host)
		}
		h.hosts = append(h.hosts, net.JoinHostPort(name, port))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", ErrBadURL, err)
	}
	h.query = q
	return h, nil
}

// intParam reads a positive integer query parameter; absent means 0.
func intParam(q url.Values, name string) (int, error) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %s=%q: want a positive integer", ErrBadURL, name, s)
	}
	return n, nil
}
