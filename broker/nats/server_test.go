package nats

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
)

// The package's tests run their own embedded servers: the embedded
// package imports this one, so this one's tests cannot import it.

// startServer starts a NATS server with JetStream in the process, storing
// in dir and listening on no port.
func startServer(ctx context.Context, dir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{DontListen: true, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true})
	if err != nil {
		return nil, err
	}
	srv.Start()
	ready := make(chan bool, 1)
	go func() { ready <- srv.ReadyForConnections(time.Minute) }()
	select {
	case ok := <-ready:
		if ok {
			return srv, nil
		}
		err = errors.New("the server did not start")
	case <-ctx.Done():
		err = ctx.Err()
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil, err
}

// openOnServer starts a server storing in dir and opens a broker on it;
// closing the broker stops the server.
func openOnServer(ctx context.Context, dir string, opts *Options) (*Broker, *server.Server, error) {
	srv, err := startServer(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	stop := func() { srv.Shutdown(); srv.WaitForShutdown() }
	nc, err := natsgo.Connect("", natsgo.InProcessServer(srv))
	if err != nil {
		stop()
		return nil, nil, err
	}
	b, err := OpenConn(ctx, nc, opts)
	if err != nil {
		stop()
		return nil, nil, err
	}
	b.afterClose = stop
	return b, srv, nil
}

// openServed is openOnServer without the server.
func openServed(ctx context.Context, dir string, opts *Options) (*Broker, error) {
	b, _, err := openOnServer(ctx, dir, opts)
	return b, err
}
