// Package peers finds the real protocol peers that tests run against: the
// npm packages of package.json in this directory (MCP reference servers
// and conformance suite, the A2A JavaScript SDK, the NATS client that
// agents written for Node speak JetStream with) and the Node 22 they run
// on, installed by `npm ci` (as .ci/run does).
//
// A test that needs them calls [Node] or [Package]: when they are not
// installed, the test is skipped, unless CALF_TEST_SERVICES is set, when
// it fails.
//
// The packages, pinned by package-lock.json: the MCP reference servers and
// conformance suite, @a2a-js/sdk, the openai client (against the
// OpenAI-compatible API), @ag-ui/client and the nats client. convagent/agent.mjs
// is an external conversation agent in Node.js written on the wire format
// alone ([ConversationAgent] finds it).
package peers
