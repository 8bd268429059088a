// Package embedded runs a NATS server with JetStream inside the process,
// for a durable [calf.Broker] without a separate server:
//
//	b, err := embedded.Open(ctx, dir, nil)
//
// starts a single-node server storing its messages in files under dir and
// returns a [nats.Broker] connected to it in process. The server listens
// on no network port: only the broker's own process reaches it. Close
// shuts it down; opening the same dir again resumes with the messages not
// yet handled.
//
// The server lives in this package, apart from
// [github.com/calf-go/calf/broker/nats], so that a program that connects
// to an external server with [nats.Open] does not compile it in. The
// URL scheme nats+embedded:// of the adapters package opens it.
package embedded
