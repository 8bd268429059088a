package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// calf run --model anthropic:... and gemini:... talk to the provider's API
// (here a fake at the provider's base URL variable) with the provider's
// key; without the key, the usage error names the variable to set.
func TestRunNativeProviders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.URL.Path == "/v1/messages" && r.Header.Get("X-Api-Key") == "ka" && strings.Contains(string(body), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}`,
				`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Bonjour from Claude"}}`,
				`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			} {
				_, _ = io.WriteString(w, ev+"\n\n")
			}
		case r.URL.Path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent" && r.Header.Get("X-Goog-Api-Key") == "kg":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Bonjour from Gemini"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":7}}`+"\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"unexpected `+r.URL.Path+`"}}`)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		spec, keyVar, key, baseVar, want string
	}{
		{"anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY", "ka", "ANTHROPIC_BASE_URL", "Bonjour from Claude"},
		{"gemini:gemini-2.5-flash", "GEMINI_API_KEY", "kg", "GEMINI_BASE_URL", "Bonjour from Gemini"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			isolate(t)
			t.Setenv(tc.baseVar, srv.URL)
			got := runMain(t.Context(), "", "run", "--store", "memory:", "--model", tc.spec, "hi")
			if got.code != exitUsage || !strings.Contains(got.stderr, tc.keyVar) {
				t.Errorf("without %s: exit %d, stderr %q; want a usage error naming %s", tc.keyVar, got.code, got.stderr, tc.keyVar)
			}
			t.Setenv(tc.keyVar, tc.key)
			got = runMain(t.Context(), "", "run", "--store", "memory:", "--model", tc.spec, "hi")
			if got.code != exitOK || !strings.Contains(got.stdout, tc.want) {
				t.Errorf("calf run --model %s = %d, stdout %q, stderr %q; want %q", tc.spec, got.code, got.stdout, got.stderr, tc.want)
			}
		})
	}
}
