// Package peers finds the real protocol peers that tests run against: the
// npm packages of package.json in this directory (MCP reference servers
// and conformance suite, the A2A JavaScript SDK, the NATS client that
// agents written for Node speak JetStream with) and the Node 22 they run
// on, installed by `npm ci` (as .ci/run does).
//
// A test that needs them calls [Node] or [Package]: when they are not
// installed, the test is skipped, unless CALF_TEST_SERVICES is set, when
// it fails.
package peers
