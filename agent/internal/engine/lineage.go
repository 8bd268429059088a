package engine

// A Lineage is the part of a run's stored record that links it to other
// runs: where its output goes, the run that started it, the correlation
// id it shares, and the handoff chain that led to it and the run it
// handed off to. A record embeds it, so that its fields are the record's,
// in place: their JSON is a stored format, as the record's is. Package
// agent's ReplyTo and Hop are its user's view of [ReplyTo] and [Hop],
// converted to and from them.
type Lineage struct {
	// ReplyTo is where the output goes when the run ends, besides the
	// agent's output channel.
	ReplyTo *ReplyTo `json:"reply_to,omitempty"`
	// Parent is the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// Correlation is the correlation id of the run's events when it is not
	// the run id: the runs of a handoff chain share the first one's.
	Correlation string `json:"correlation,omitempty"`
	// Chain lists the runs that handed off, one to the next, to reach this
	// run, oldest first.
	Chain []Hop `json:"chain,omitempty"`
	// HandedOffTo is the run that continues a run that handed off.
	HandedOffTo *Hop `json:"handed_off_to,omitempty"`
}

// ReplyTo names where a run's output goes when the run ends, besides the
// agent's output channel (package agent's ReplyTo says how).
type ReplyTo struct {
	Channel       string `json:"channel"`
	Key           string `json:"key,omitempty"`
	CorrelationID string `json:"correlation_id,omitempty"`
	Ref           string `json:"ref,omitempty"`
}

// Hop is one run of a handoff chain.
type Hop struct {
	Agent string `json:"agent"`
	RunID string `json:"run_id"`
}

// CorrelationID is the correlation id of the events of run, whose lineage
// l is.
func (l *Lineage) CorrelationID(run string) string {
	if l.Correlation != "" {
		return l.Correlation
	}
	return run
}

// HandoffRunID is the id of the run that continues run, whose lineage l
// is, after a handoff.
func (l *Lineage) HandoffRunID(run string) string {
	first := run
	if len(l.Chain) > 0 {
		first = l.Chain[0].RunID
	}
	return HandoffRunID(first, len(l.Chain)+1)
}
