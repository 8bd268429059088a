package kafka

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParseURL reads the seed brokers and options of a broker from a URL of
// the form
//
//	kafka://host1:9092,host2:9092?partitions=32&topic_prefix=prod.&replication_factor=3
//
// The host part lists the seed brokers, separated by commas; a broker
// without a port gets 9092. The query may set partitions,
// replication_factor, topic_prefix, max_attempts, concurrency,
// max_pending, session_timeout, heartbeat_interval, rebalance_timeout,
// commit_interval, metadata_max_age, outage_budget and failover_after (durations as 6s,
// 500ms; failover_after=off turns failover off). Other
// parameters are an error, so that a misspelt one is not ignored.
func ParseURL(rawURL string) (seeds []string, opts *Options, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: url: %w", err)
	}
	if u.Scheme != "kafka" {
		return nil, nil, fmt.Errorf("kafka: url %q: scheme is not kafka", rawURL)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, nil, fmt.Errorf("kafka: url %q: unexpected path %q", rawURL, u.Path)
	}
	for h := range strings.SplitSeq(u.Host, ",") {
		if h == "" {
			continue
		}
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h += ":9092"
		}
		seeds = append(seeds, h)
	}
	if len(seeds) == 0 {
		return nil, nil, fmt.Errorf("kafka: url %q: no broker", rawURL)
	}
	opts = &Options{}
	ints := map[string]*int{
		"partitions":         &opts.Partitions,
		"replication_factor": &opts.ReplicationFactor,
		"max_attempts":       &opts.MaxAttempts,
		"concurrency":        &opts.Concurrency,
	}
	durations := map[string]*time.Duration{
		"session_timeout":    &opts.SessionTimeout,
		"heartbeat_interval": &opts.HeartbeatInterval,
		"rebalance_timeout":  &opts.RebalanceTimeout,
		"commit_interval":    &opts.CommitInterval,
		"metadata_max_age":   &opts.MetadataMaxAge,
		"outage_budget":      &opts.OutageBudget,
	}
	var errs []error
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch {
		case ints[k] != nil:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("kafka: url: %s=%q is not a positive integer", k, v))
			}
			*ints[k] = n
		case durations[k] != nil:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("kafka: url: %s=%q is not a positive duration", k, v))
			}
			*durations[k] = d
		case k == "max_pending":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("kafka: url: %s=%q is not a positive integer", k, v))
			}
			opts.MaxPending = n
		case k == "failover_after":
			if v == "off" {
				opts.FailoverAfter = -1
				break
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("kafka: url: %s=%q is neither a positive duration nor off", k, v))
			}
			opts.FailoverAfter = d
		case k == "topic_prefix":
			opts.TopicPrefix = v
		default:
			errs = append(errs, fmt.Errorf("kafka: url: unknown parameter %q", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return seeds, opts, nil
}
