//lint:file-ignore SA1019 the suite still checks logging and sampling, deprecated in the newest protocol version

package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/calf-go/calf/internal/peers"
	"github.com/calf-go/calf/mcp"
	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// The conformance suite's fixtures: what the suite calls, as the official
// SDK's everything-server offers it. Tools whose results Calf's tool
// results express (text, images, errors, progress, and those that use the
// client through mcp.Request: logging, sampling, elicitation) are Calf
// tools offered by mcp.Server; audio and embedded resources, resources,
// prompts and completions, which Calf does not model, go through the SDK
// server that mcp.Server wraps.

const (
	testImage = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	testAudio = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func decode64(s string) []byte {
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

var emptyObject = json.RawMessage(`{"type":"object","properties":{}}`)

// raw makes a Calf tool from a handler over the arguments.
func raw(name, desc string, schema json.RawMessage, fn func(ctx context.Context, args json.RawMessage) (*tool.Result, error)) tool.Tool {
	return tool.NewRaw(model.ToolDefinition{Name: name, Description: desc, Parameters: schema}, fn)
}

func text(s string) *tool.Result { return tool.TextResult(s) }

func conformanceServer(t *testing.T) *mcp.Server {
	s := mcp.NewServer(nil, &mcp.ServerOptions{
		Name: "calf-conformance", Version: "1.0.0",
		SDK: &sdk.ServerOptions{
			Capabilities: &sdk.ServerCapabilities{Logging: &sdk.LoggingCapabilities{}},
			CompletionHandler: func(context.Context, *sdk.CompleteRequest) (*sdk.CompleteResult, error) {
				return &sdk.CompleteResult{Completion: sdk.CompletionResultDetails{Values: []string{}}}, nil
			},
			SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		},
	})
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Calf tools.
	must(s.AddTool(raw("test_simple_text", "Returns simple text.", emptyObject, func(context.Context, json.RawMessage) (*tool.Result, error) {
		return text("This is a simple text response for testing."), nil
	})))
	must(s.AddTool(raw("test_image_content", "Returns an image.", emptyObject, func(context.Context, json.RawMessage) (*tool.Result, error) {
		return &tool.Result{Parts: []model.Part{model.ImagePart("image/png", decode64(testImage))}}, nil
	})))
	must(s.AddTool(raw("test_error_handling", "Fails.", emptyObject, func(context.Context, json.RawMessage) (*tool.Result, error) {
		return nil, errors.New("this tool intentionally returns an error for testing")
	})))
	must(s.AddTool(raw("test_tool_with_progress", "Reports progress.", emptyObject, func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		for _, p := range []float64{0, 50, 100} {
			if err := mcp.Progress(ctx, p, 100, fmt.Sprintf("Completed step %.0f of 100", p)); err != nil {
				return nil, err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return text(fmt.Sprint(mcp.Request(ctx).Params.GetProgressToken())), nil
	})))
	must(s.AddTool(raw("test_tool_with_logging", "Logs.", emptyObject, func(ctx context.Context, _ json.RawMessage) (*tool.Result, error) {
		req := mcp.Request(ctx)
		for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: msg}); err != nil {
				return nil, err
			}
			time.Sleep(50 * time.Millisecond)
		}
		return text("Tool with logging executed successfully"), nil
	})))
	must(s.AddTool(raw("test_sampling", "Asks the client's model.",
		json.RawMessage(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`),
		func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			var in struct{ Prompt string }
			_ = json.Unmarshal(args, &in)
			res, err := mcp.Request(ctx).Session.CreateMessage(ctx, &sdk.CreateMessageParams{
				Messages:  []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}},
				MaxTokens: 100,
			})
			if err != nil {
				return nil, fmt.Errorf("sampling failed: %w", err)
			}
			answer := "(non-text response)"
			if tc, ok := res.Content.(*sdk.TextContent); ok {
				answer = tc.Text
			}
			return text("LLM response: " + answer), nil
		})))
	elicit := func(name string, params func(args json.RawMessage) *sdk.ElicitParams, schema json.RawMessage) {
		must(s.AddTool(raw(name, "Asks the user.", schema, func(ctx context.Context, args json.RawMessage) (*tool.Result, error) {
			res, err := mcp.Request(ctx).Session.Elicit(ctx, params(args))
			if err != nil {
				return nil, fmt.Errorf("elicitation failed: %w", err)
			}
			return text(fmt.Sprintf("Elicitation result: action=%s, content=%v", res.Action, res.Content)), nil
		})))
	}
	elicit("test_elicitation", func(args json.RawMessage) *sdk.ElicitParams {
		var in struct{ Message string }
		_ = json.Unmarshal(args, &in)
		return &sdk.ElicitParams{Message: in.Message, RequestedSchema: json.RawMessage(
			`{"type":"object","properties":{"username":{"type":"string","description":"Your preferred username"}},"required":["username"]}`)}
	}, json.RawMessage(`{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}`))
	elicit("test_elicitation_sep1034_defaults", func(json.RawMessage) *sdk.ElicitParams {
		return &sdk.ElicitParams{Message: "Test defaults for primitives", RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"name":{"type":"string","description":"User name","default":"John Doe"},` +
			`"age":{"type":"integer","description":"User age","default":30},` +
			`"score":{"type":"number","description":"User score","default":95.5},` +
			`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},` +
			`"verified":{"type":"boolean","description":"Verification status","default":true}}}`)}
	}, emptyObject)
	elicit("test_elicitation_sep1330_enums", func(json.RawMessage) *sdk.ElicitParams {
		return &sdk.ElicitParams{Message: "Test enum schemas", RequestedSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},` +
			`"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},` +
			`"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},` +
			`"untitledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},` +
			`"titledMulti":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"string","anyOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]}}}}`)}
	}, emptyObject)
	must(s.AddTool(raw("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features.", json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
			"contactMethod": {"type": "string", "enum": ["phone", "email"]}, "phone": {"type": "string"}, "email": {"type": "string"}},
		"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
		"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
		"then": {"required": ["phone"]}, "else": {"required": ["email"]},
		"additionalProperties": false}`), func(_ context.Context, args json.RawMessage) (*tool.Result, error) {
		return text(fmt.Sprintf("JSON Schema 2020-12 tool called with: %s", args)), nil
	})))

	// Content Calf tools do not carry, through the SDK server.
	sd := s.SDK()
	sdkTool := func(name string, content ...sdk.Content) {
		sd.AddTool(&sdk.Tool{Name: name, Description: "Returns " + name[len("test_"):] + ".", InputSchema: emptyObject}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: content}, nil
		})
	}
	sdkTool("test_audio_content", &sdk.AudioContent{Data: decode64(testAudio), MIMEType: "audio/wav"})
	sdkTool("test_embedded_resource", &sdk.EmbeddedResource{Resource: &sdk.ResourceContents{
		URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource"}})
	sdkTool("test_multiple_content_types", &sdk.TextContent{Text: "This is text content"},
		&sdk.ImageContent{Data: decode64(testImage), MIMEType: "image/png"},
		&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "This is an embedded resource"}})

	// Resources.
	resource := func(name, uri, mime string, contents *sdk.ResourceContents) {
		sd.AddResource(&sdk.Resource{Name: name, URI: uri, MIMEType: mime, Description: name},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				c := *contents
				c.URI = req.Params.URI
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{&c}}, nil
			})
	}
	resource("static-text", "test://static-text", "text/plain", &sdk.ResourceContents{MIMEType: "text/plain", Text: "This is the content of the static text resource."})
	resource("static-binary", "test://static-binary", "image/png", &sdk.ResourceContents{MIMEType: "image/png", Blob: decode64(testImage)})
	resource("watched-resource", "test://watched-resource", "text/plain", &sdk.ResourceContents{MIMEType: "text/plain", Text: "Watched resource content"})
	idRE := regexp.MustCompile(`^test://template/([^/]+)/data$`)
	sd.AddResourceTemplate(&sdk.ResourceTemplate{Name: "template", URITemplate: "test://template/{id}/data", MIMEType: "application/json"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			id := ""
			if m := idRE.FindStringSubmatch(req.Params.URI); m != nil {
				id = m[1]
			}
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json",
				Text: fmt.Sprintf(`{"id": "%s", "templateTest": true, "data": "Data for ID: %s"}`, id, id)}}}, nil
		})

	// Prompts.
	prompt := func(p *sdk.Prompt, fn func(args map[string]string) []*sdk.PromptMessage) {
		sd.AddPrompt(p, func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Description: p.Description, Messages: fn(req.Params.Arguments)}, nil
		})
	}
	user := func(c sdk.Content) *sdk.PromptMessage { return &sdk.PromptMessage{Role: "user", Content: c} }
	prompt(&sdk.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments"}, func(map[string]string) []*sdk.PromptMessage {
		return []*sdk.PromptMessage{user(&sdk.TextContent{Text: "This is a simple prompt for testing."})}
	})
	prompt(&sdk.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with required arguments", Arguments: []*sdk.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true},
	}}, func(a map[string]string) []*sdk.PromptMessage {
		return []*sdk.PromptMessage{user(&sdk.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})}
	})
	prompt(&sdk.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt that includes an embedded resource", Arguments: []*sdk.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
	}}, func(a map[string]string) []*sdk.PromptMessage {
		return []*sdk.PromptMessage{
			user(&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: a["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
			user(&sdk.TextContent{Text: "Please process the embedded resource above."}),
		}
	})
	prompt(&sdk.Prompt{Name: "test_prompt_with_image", Description: "A prompt that includes image content"}, func(map[string]string) []*sdk.PromptMessage {
		return []*sdk.PromptMessage{
			user(&sdk.ImageContent{Data: decode64(testImage), MIMEType: "image/png"}),
			user(&sdk.TextContent{Text: "Please analyze the image above."}),
		}
	})
	return s
}

var totalRE = regexp.MustCompile(`Total: (\d+) passed, (\d+) failed`)

// conformance runs the MCP conformance suite's command (server or client)
// with args, and returns how many checks passed and failed, and its
// output.
func conformance(t *testing.T, args ...string) (passed, failed int, out string) {
	t.Helper()
	node := peers.Node(t)
	suite := peers.Package(t, "@modelcontextprotocol/conformance/dist/index.js")
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{suite}, args...)...)
	cmd.Dir = t.TempDir()
	b, _ := cmd.CombinedOutput()
	out = string(b)
	m := totalRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary from the conformance suite:\n%s", out)
	}
	passed, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[2])
	return passed, failed, out
}

// Every active server scenario of @modelcontextprotocol/conformance
// passes against mcp.Server over streamable HTTP, as against the official
// SDK's everything-server (40 checks in 30 scenarios, stateful).
func TestServerConformance(t *testing.T) {
	srv := httptest.NewServer(conformanceServer(t).Handler(nil))
	defer srv.Close()
	args := []string{"server", "--url", srv.URL + "/mcp"}
	if sc := os.Getenv("CALF_CONFORMANCE_SCENARIO"); sc != "" {
		args = append(args, "--scenario", sc, "--verbose")
		_, _, out := conformance(t, args...)
		t.Log(out)
		return
	}
	passed, failed, out := conformance(t, args...)
	summary := out[strings.Index(out, "=== SUMMARY ==="):]
	if failed != 0 || passed < 40 {
		t.Errorf("conformance: %d passed, %d failed; want 40 or more and none failed\n%s", passed, failed, summary)
	}
	t.Logf("server conformance: %d checks passed, %d failed", passed, failed)
	if dir := os.Getenv("CALF_CONFORMANCE_OUT"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "server.txt"), []byte(summary), 0o644)
	}
}

// conformanceClient carries out a client scenario of the conformance suite
// with mcp.Client against the suite's server at url: the test binary is
// the client command the suite runs. Authorization and elicitation are
// configured as the official SDK's conformance client does.
func conformanceClient(scenario, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cfg := mcp.Config{Name: "conf", URL: url}
	var conf map[string]any
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &conf)
	switch {
	case strings.HasPrefix(scenario, "auth/"):
		ac := &auth.AuthorizationCodeHandlerConfig{
			RedirectURL:                    "http://localhost:3000/callback",
			AuthorizationCodeFetcher:       fetchAuthorizationCode,
			ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: "https://conformance-test.local/client-metadata.json"},
			DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
				Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{"http://localhost:3000/callback"}},
			},
		}
		id, _ := conf["client_id"].(string)
		secret, _ := conf["client_secret"].(string)
		if id != "" && secret != "" {
			ac.PreregisteredClient = &oauthex.ClientCredentials{ClientID: id, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: secret}}
		}
		h, err := auth.NewAuthorizationCodeHandler(ac)
		if err != nil {
			return err
		}
		cfg.OAuth = h
	case strings.HasPrefix(scenario, "elicitation"):
		cfg.SDK = &sdk.ClientOptions{ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		}}
	}
	c, err := mcp.New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	tools, err := c.Tools(ctx)
	if err != nil {
		return err
	}
	call := func(name string, args string) error {
		for _, t := range tools {
			if t.Definition().Name == "conf__"+name {
				res, err := t.Call(ctx, json.RawMessage(args))
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("tool %s: %s", name, res.Text())
				}
				return nil
			}
		}
		return fmt.Errorf("no tool %s", name)
	}
	switch {
	case scenario == "initialize":
		return nil
	case scenario == "tools_call":
		return call("add_numbers", `{"a":5,"b":3}`)
	case scenario == "sse-retry":
		return call("test_reconnection", `{}`)
	case scenario == "elicitation-sep1034-client-defaults":
		return call("test_client_elicitation_defaults", `{}`)
	case strings.HasPrefix(scenario, "auth/"):
		return call("test-tool", `{}`)
	}
	return fmt.Errorf("scenario %s is not one this client carries out", scenario)
}

// fetchAuthorizationCode follows the conformance suite's authorization
// server, which redirects at once to the callback with the code.
func fetchAuthorizationCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, "GET", args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc, err := neturl.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// The conformance suite's core client scenarios, with mcp.Client; those
// it does not carry out are listed, with the reason, in
// testdata/conformance-baseline.yml.
func TestClientConformance(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("CALF_CONFORMANCE_CLIENT", "1")
	baseline, err := filepath.Abs("testdata/conformance-baseline.yml")
	if err != nil {
		t.Fatal(err)
	}
	passed, failed, out := conformance(t, "client", "--command", exe, "--suite", "core", "--expected-failures", baseline)
	summary := out
	if i := strings.Index(out, "=== SUMMARY ==="); i >= 0 {
		summary = out[i:]
	}
	t.Logf("client conformance (core suite): %d checks passed, %d failed (expected failures in the baseline)\n%s", passed, failed, summary)
	if failed == 0 && !strings.Contains(strings.ToLower(out), "unexpected failures") {
		return
	}
	// sse-retry times the client's reconnection against the server's
	// retry field (500 ms, late past 700 ms): on a loaded machine the
	// client can be late for want of CPU, not for a fault. That scenario
	// alone off the baseline is run again, up to three times; a real fault
	// (no reconnection, too early, no Last-Event-ID) fails every time.
	if unexpected := unexpectedScenarios(out); slices.Equal(unexpected, []string{"sse-retry"}) {
		for try := 1; try <= 3; try++ {
			ok, again := conformanceScenario(t, "client", "--command", exe, "--scenario", "sse-retry", "--expected-failures", baseline)
			if ok {
				t.Logf("sse-retry failed in the suite, probably late for want of CPU, and passed when run again (try %d):\n%s", try, again)
				return
			}
			out += "\n=== sse-retry again ===\n" + again
		}
	}
	t.Errorf("results differ from the baseline:\n%s", out)
}

// unexpectedRE matches a scenario the conformance suite lists among its
// unexpected failures.
var unexpectedRE = regexp.MustCompile(`(?m)^\s*✗ (\S+)\s*$`)

// unexpectedScenarios returns the scenarios that out, the output of a
// conformance run with a baseline, lists as unexpected failures.
func unexpectedScenarios(out string) []string {
	i := strings.Index(strings.ToLower(out), "unexpected failures (not in baseline)")
	if i < 0 {
		return nil
	}
	var names []string
	for _, m := range unexpectedRE.FindAllStringSubmatch(out[i:], -1) {
		names = append(names, m[1])
	}
	return names
}

// conformanceScenario runs the conformance suite with args, for one
// scenario, and reports whether it passed (its exit status).
func conformanceScenario(t *testing.T, args ...string) (bool, string) {
	t.Helper()
	node := peers.Node(t)
	suite := peers.Package(t, "@modelcontextprotocol/conformance/dist/index.js")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{suite}, args...)...)
	cmd.Dir = t.TempDir()
	b, err := cmd.CombinedOutput()
	return err == nil, string(b)
}

func TestUnexpectedScenarios(t *testing.T) {
	out := "✗ sse-retry: 3 passed, 0 failed, 1 warnings\n\nTotal: 30 passed, 0 failed, 1 warnings\n\n" +
		"\x1b[31mUnexpected failures (not in baseline):\x1b[0m\n  ✗ sse-retry\n\n\x1b[31mUnexpected failures detected: these scenarios are not in your expected-failures baseline.\x1b[0m\n"
	if got := unexpectedScenarios(out); !slices.Equal(got, []string{"sse-retry"}) {
		t.Errorf("unexpectedScenarios = %q", got)
	}
	if got := unexpectedScenarios("Total: 31 passed, 0 failed, 0 warnings\nBaseline check passed"); got != nil {
		t.Errorf("unexpectedScenarios of a pass = %q", got)
	}
}
