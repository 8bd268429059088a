package embedded

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/calf-go/calf"
	"github.com/calf-go/calf/broker/nats"
)

// Broker is a [nats.Broker] on a server that runs in the process. Its
// methods are those of [nats.Broker]; Close also shuts the server down.
type Broker struct {
	*nats.Broker
	srv *server.Server
}

var _ calf.Broker = (*Broker)(nil)

// Open starts a NATS server with JetStream inside this process, storing
// its messages in files under dir, and returns a broker connected to it
// in process: the server listens on no network port. Close shuts the
// server down; opening dir again resumes with the messages that were not
// yet handled. The server is ready or Open has failed when it returns;
// ctx bounds the wait.
func Open(ctx context.Context, dir string, opts *nats.Options) (*Broker, error) {
	if dir == "" {
		return nil, errors.New("nats: embedded server: no directory")
	}
	srv, err := start(ctx, dir)
	if err != nil {
		return nil, err
	}
	var connect []natsgo.Option
	if opts != nil {
		connect = opts.ConnectOptions
	}
	nc, err := natsgo.Connect("", append([]natsgo.Option{natsgo.Name("calf"), natsgo.InProcessServer(srv)}, connect...)...)
	if err != nil {
		shutdown(srv)
		return nil, fmt.Errorf("nats: connect to the embedded server: %w", err)
	}
	b, err := nats.OpenConn(ctx, nc, opts)
	if err != nil {
		shutdown(srv)
		return nil, err
	}
	return &Broker{Broker: b, srv: srv}, nil
}

// Close stops the broker as [nats.Broker.Close] does, then shuts the
// server down. It is idempotent.
func (b *Broker) Close() error {
	err := b.Broker.Close()
	shutdown(b.srv)
	return err
}

// Server returns the server the broker runs on, for connecting other
// clients to it in process ([natsgo.InProcessServer]).
func (b *Broker) Server() *server.Server { return b.srv }

// start starts a single-node NATS server with JetStream, storing in dir
// and listening on no network port, and waits until it is ready for
// connections or ctx ends.
func start(ctx context.Context, dir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "calf-embedded",
		DontListen: true,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	srv.Start()
	ready := make(chan bool, 1)
	go func() { ready <- srv.ReadyForConnections(time.Minute) }()
	select {
	case ok := <-ready:
		if !ok {
			shutdown(srv)
			return nil, errors.New("nats: embedded server did not start")
		}
	case <-ctx.Done():
		shutdown(srv)
		return nil, fmt.Errorf("nats: embedded server: %w", ctx.Err())
	}
	return srv, nil
}

func shutdown(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}
