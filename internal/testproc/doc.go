// Package testproc runs a test binary again as a child process, for tests
// that need processes of their own: workers killed in the middle of a run,
// servers stopped and started again.
//
// The parent starts a child with [Start], naming an environment variable
// and a configuration, which the child receives as JSON in that variable.
// The child is the same test binary: its TestMain calls [Main] first,
// which, when the variable is set, runs the child instead of the tests and
// exits. The child lives until the parent closes its standard input
// ([Process.Stop]) or kills it ([Process.Kill]); it tells the parent what
// it does by lines on its standard output ([Report]), which the parent
// reads one by one ([Options]).
//
//	func TestMain(m *testing.M) {
//		testproc.Main("CALF_X_WORKER", runWorker) // returns unless a child
//		os.Exit(m.Run())
//	}
//
//	func runWorker(ctx context.Context, cfg *workerConfig) error {
//		// serve until ctx ends: the parent closed our standard input
//	}
package testproc
