package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/calf-go/calf/internal/testproc"
)

// The private services of tests of other packages (the kill tests of
// internal/e2e): each on a free port outside the ephemeral range, in a
// temporary directory, stopped when the test ends.

// natsdEnv turns the test binary into a NATS server; its value is the
// server's configuration (natsdConfig) as JSON.
const natsdEnv = "CALF_CHAOS_NATSD"

// ServeNATSD, called by a TestMain before m.Run, has the test binary run
// as the NATS server [StartNATS] starts (the binary started again), and
// exit, when it is started as one.
func ServeNATSD() { testproc.Main(natsdEnv, runNATSD) }

// NeedPostgres skips the test when PostgreSQL's programs are missing,
// unless CALF_TEST_SERVICES is set, which fails it.
func NeedPostgres(t testing.TB) {
	t.Helper()
	needPrograms(t, filepath.Join(pgBin, "initdb"), filepath.Join(pgBin, "postgres"))
}

// StartPostgres starts a private PostgreSQL and returns its URL
// (database postgres, trust authentication); it stops when t ends.
func StartPostgres(t testing.TB) string {
	t.Helper()
	return startPostgres(t).url
}

// StartNATS starts a private NATS server with JetStream (the test binary
// started again: see [ServeNATSD]) and returns its URL; it stops when t
// ends.
func StartNATS(t testing.TB) string {
	t.Helper()
	return startNATS(t).url
}

// Where the services' programs are.
const (
	pgBin       = "/usr/lib/postgresql/15/bin"
	redisServer = "/usr/bin/redis-server"
)

// sharedPorts are the machine's shared services' ports, which the test
// never uses.
var sharedPorts = map[int]bool{5432: true, 6379: true, 4222: true}

// serviceTimeout bounds a service's start and its stop.
const serviceTimeout = 60 * time.Second

// needServices skips the test when the programs of the services are
// missing, unless CALF_TEST_SERVICES is set, which fails it.
func needServices(t testing.TB) {
	t.Helper()
	needPrograms(t, filepath.Join(pgBin, "initdb"), filepath.Join(pgBin, "postgres"), redisServer)
}

// needPrograms skips the test when a program is missing, unless
// CALF_TEST_SERVICES is set, which fails it.
func needPrograms(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CALF_TEST_SERVICES") != "" {
				t.Fatalf("%s is missing: %v", p, err)
			}
			t.Skipf("%s is missing: %v", p, err)
		}
	}
}

// freePort returns a port of 127.0.0.1 that nothing listens on, outside
// the ephemeral range (32768-60999, where a reconnecting client's own
// port could take a stopped server's) and never one of the shared
// services'.
func freePort(t testing.TB) int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 12000 {
		port := 20000 + rand.IntN(12000)
		if sharedPorts[port] || portsTaken[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsTaken[port] = true
		return port
	}
	t.Fatal("no free port between 20000 and 32000")
	return 0
}

// portsTaken are the ports freePort has given, which the services may not
// be listening on yet.
var (
	portMu     sync.Mutex
	portsTaken = map[int]bool{}
)

// service is a server process the test owns: it can be stopped, killed,
// paused and started again on the same port and data.
type service struct {
	name string
	port int
	url  string
	log  string // the file that gets the process's output
	// command returns the command that starts the server.
	command func() *exec.Cmd
	// ready returns nil once the server answers.
	ready func(ctx context.Context) error
	// stopSignal is the server's own immediate shutdown, termSignal its
	// graceful one.
	stopSignal, termSignal syscall.Signal

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.Closer
	exited chan struct{}
	paused bool
}

// start starts the server and waits until it answers.
func (s *service) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := s.command()
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.stdin, s.exited, s.paused = cmd, stdin, exited, false
	s.mu.Unlock()
	return s.waitReady(ctx)
}

// waitReady waits until the server answers.
func (s *service) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serviceTimeout)
	defer cancel()
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	var last error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		last = s.ready(actx)
		acancel()
		if last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it answered (see %s): %v", s.name, s.log, last)
		case <-ctx.Done():
			return fmt.Errorf("%s does not answer: %v", s.name, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// down takes the server down with action, "stop" (its immediate
// shutdown), "term" (its graceful shutdown) or "kill" (SIGKILL), and waits
// until its processes have exited.
func (s *service) down(action string) error {
	s.mu.Lock()
	cmd, exited, paused := s.cmd, s.exited, s.paused
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", s.name)
	}
	pgid := cmd.Process.Pid
	switch action {
	case "stop", "term":
		sig := s.stopSignal
		if action == "term" {
			sig = s.termSignal
		}
		if err := cmd.Process.Signal(sig); err != nil {
			return err
		}
		if paused {
			_ = syscall.Kill(-pgid, syscall.SIGCONT)
		}
	case "kill":
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	select {
	case <-exited:
	case <-time.After(serviceTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// What the server left (PostgreSQL's backends after its postmaster)
	// must not hold its port or its data when it starts again.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
	return nil
}

// pause stops every process of the server with SIGSTOP; resume continues
// them.
func (s *service) pause() error  { return s.signalGroup(syscall.SIGSTOP, true) }
func (s *service) resume() error { return s.signalGroup(syscall.SIGCONT, false) }

func (s *service) signalGroup(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("%s is not running", s.name)
	}
	s.paused = paused
	return syscall.Kill(-s.cmd.Process.Pid, sig)
}

// close stops the server for good: politely, then with SIGKILL.
func (s *service) close() {
	s.mu.Lock()
	cmd, stdin, exited := s.cmd, s.stdin, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
	_ = stdin.Close()
	_ = cmd.Process.Signal(s.stopSignal)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
}

// newService registers the server's end with t and starts it.
func newService(t testing.TB, s *service) *service {
	t.Helper()
	t.Cleanup(s.close)
	if err := s.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s on port %d (log %s)", s.name, s.port, s.log)
	return s
}

// startPostgres starts PostgreSQL 15 in a directory of its own, as the
// postgres user when the test runs as root (PostgreSQL refuses root).
func startPostgres(t testing.TB) *service {
	t.Helper()
	dir := t.TempDir()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root, and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The postgres user must reach its directory through ours.
		for d := dir; d != os.TempDir() && d != "/" && d != "."; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	asPostgres := func(cmd *exec.Cmd) *exec.Cmd {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	if err := os.Mkdir(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := os.Chown(sock, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	initdb := asPostgres(exec.Command(filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"))
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	return newService(t, &service{
		name: "postgres",
		port: port,
		url:  url,
		log:  filepath.Join(dir, "postgres.log"),
		command: func() *exec.Cmd {
			return asPostgres(exec.Command(filepath.Join(pgBin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", sock,
				"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=64MB"))
		},
		ready: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "SELECT 1")
			return err
		},
		// What pg_ctl stop -m immediate and -m fast send.
		stopSignal: syscall.SIGQUIT,
		termSignal: syscall.SIGINT,
	})
}

// startRedis starts Redis with an append-only file synced at every write.
func startRedis(t testing.TB) *service {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	return newService(t, &service{
		name: "redis",
		port: port,
		url:  url,
		log:  filepath.Join(dir, "redis.log"),
		command: func() *exec.Cmd {
			return exec.Command(redisServer, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--save", "")
		},
		ready: func(ctx context.Context) error {
			c := goredis.NewClient(&goredis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err()
		},
		stopSignal: syscall.SIGTERM,
		termSignal: syscall.SIGTERM,
	})
}

// startNATS starts a NATS server with JetStream: the test binary as a
// server process (see runNATSD), the module's nats-server embedded.
func startNATS(t testing.TB) *service {
	t.Helper()
	port := freePort(t)
	s := natsService(t, "nats", natsdConfig{Port: port, Dir: filepath.Join(t.TempDir(), "jetstream")})
	return newService(t, s)
}

// startNATSCluster starts a cluster of three NATS servers with JetStream,
// nats-1, nats-2 and nats-3, each the test binary as a server process
// routed to the other two, and returns them with the URL of the cluster
// (every node's address) a worker is given. The nodes start together: a
// node answers only once the cluster has a JetStream leader, which takes
// two of them.
func startNATSCluster(t testing.TB) ([]*service, string) {
	t.Helper()
	var client, routes [3]int
	for i := range 3 {
		client[i], routes[i] = freePort(t), freePort(t)
	}
	nodes := make([]*service, 3)
	var hosts []string
	for i := range 3 {
		cfg := natsdConfig{Port: client[i], Dir: filepath.Join(t.TempDir(), "jetstream"),
			Name: fmt.Sprintf("nats-%d", i+1), ClusterPort: routes[i]}
		for j := range 3 {
			if j != i {
				cfg.Routes = append(cfg.Routes, routes[j])
			}
		}
		nodes[i] = natsService(t, cfg.Name, cfg)
		t.Cleanup(nodes[i].close)
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", client[i]))
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, s := range nodes {
		wg.Go(func() { errs[i] = s.start(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range nodes {
		t.Logf("%s on port %d (log %s)", s.name, s.port, s.log)
	}
	return nodes, "nats://" + strings.Join(hosts, ",")
}

// natsService is the NATS server cfg describes, as a service named name.
func natsService(t testing.TB, name string, cfg natsdConfig) *service {
	t.Helper()
	if _, err := testproc.Command(natsdEnv, cfg); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", cfg.Port)
	return &service{
		name: name,
		port: cfg.Port,
		url:  url,
		log:  filepath.Join(filepath.Dir(cfg.Dir), name+".log"),
		command: func() *exec.Cmd {
			cmd, _ := testproc.Command(natsdEnv, cfg) // checked above
			return cmd
		},
		ready: func(ctx context.Context) error {
			nc, err := natsgo.Connect(url, natsgo.Timeout(time.Second), natsgo.NoReconnect())
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			_, err = js.AccountInfo(ctx)
			return err
		},
		stopSignal: syscall.SIGTERM,
		termSignal: syscall.SIGTERM,
	}
}

// natsdConfig configures a NATS server process.
type natsdConfig struct {
	Port int    `json:"port"`
	Dir  string `json:"dir"`
	// Name, ClusterPort and Routes make the server a node of a cluster
	// (named calf-chaos), listening for routes on ClusterPort and routed
	// to the other nodes' cluster ports.
	Name        string `json:"name,omitempty"`
	ClusterPort int    `json:"cluster_port,omitempty"`
	Routes      []int  `json:"routes,omitempty"`
}

// runNATSD is a NATS server with JetStream on 127.0.0.1:Port, storing in
// Dir, until ctx ends (its standard input closes) or it gets SIGTERM or
// SIGINT, when it shuts down cleanly. It prints "ready" once it takes
// connections.
func runNATSD(ctx context.Context, cfg *natsdConfig) error {
	opts := &server.Options{
		ServerName: "calf-chaos",
		Host:       "127.0.0.1",
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		NoSigs:     true,
	}
	if cfg.ClusterPort != 0 {
		opts.ServerName = cfg.Name
		opts.Cluster = server.ClusterOpts{Name: "calf-chaos", Host: "127.0.0.1", Port: cfg.ClusterPort}
		for _, p := range cfg.Routes {
			opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	srv.ConfigureLogger()
	srv.Start()
	if !srv.ReadyForConnections(time.Minute) {
		return errors.New("not ready after a minute")
	}
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
