// Package cassette records a model provider's HTTP traffic once and
// replays it in tests, so that tests of code that calls a real API run
// offline, fast and the same every time.
//
// A [Cassette] is an [http.RoundTripper] bound to a file. Give its client
// to the code under test, such as a model adapter:
//
//	func TestAnswer(t *testing.T) {
//		m, err := openai.New(openai.Options{
//			Model:      "gpt-4o-mini",
//			APIKey:     cmp.Or(os.Getenv("OPENAI_API_KEY"), "replayed"),
//			HTTPClient: cassette.ForTest(t, "testdata/answer.httprr", nil),
//		})
//		...
//	}
//
// [ForTest] fails the test on errors and closes the cassette when the test
// ends; [Open] and [Cassette.Close] do the same outside tests.
//
// # Replay and record
//
// By default a cassette replays: it answers each request from its file and
// never touches the network. A missing file is an error that names it and
// says how to record it. To record, or to record again after a change to
// the requests, set CALF_RECORD to a non-empty value:
//
//	CALF_RECORD=1 go test ./...
//
// Recording sends each request through [Options.Transport] (default
// [http.DefaultTransport]) and writes the file when the cassette is
// closed, replacing the old one. [Options.Mode] fixes the mode whatever the
// environment says, and [Recording] tells a test which mode CALF_RECORD
// asks for, for instance to skip when recording without an API key.
//
// # Matching
//
// A replayed request is answered by the first recorded exchange, in file
// order, that has not answered yet and whose request has the same method,
// URL path and query (credential parameters aside) and an equal body.
// Bodies that are JSON are compared decoded, so key order and white space
// do not count; other bodies are compared byte for byte. [Options.Match]
// replaces the body comparison, for instance to ignore a field that
// changes from run to run. The host is not compared, so a recording made
// against one server (a test server on a random port, say) answers
// requests for any other. A request that nothing matches fails with a
// [*MismatchError] whose message shows how it differs from the nearest
// recorded request.
//
// A replayed response carries the recorded status, headers and body bytes,
// so a text/event-stream response reads event by event as it came.
//
// # Scrubbing
//
// Before anything is written, credentials are replaced by [Redacted]: the
// values of the headers Authorization, Proxy-Authorization, X-Api-Key,
// Api-Key, X-Goog-Api-Key, Cookie and Set-Cookie, whatever their case, of
// the query parameter "key", and the user and password of the URL. The
// headers are kept, with the placeholder as their value, so that a
// cassette shows how a request was authenticated without the secret.
// [Options.Scrub] and [Options.ScrubResponse] remove more, such as
// account ids in a body. Request headers are not compared on replay, so
// scrubbing them does not stop a request from matching.
//
// # File format
//
// A cassette file is an "httprr trace v1" file, the text format of
// Go's httprr recorders: the line "httprr trace v1", then for each
// exchange, in the order the responses came, a line "N M" with two byte
// counts, N bytes of request as [http.Request.WriteProxy] writes it and M
// bytes of response as [http.Response.Write] writes it. Recordings made
// by other httprr recorders replay too: header lines may end in a bare
// line feed, status lines may say HTTP/2.0, and a chunked response keeps
// its framing in the file and is de-chunked when read.
package cassette
