package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/calf-go/calf/agent"
	"github.com/calf-go/calf/model"
)

// trickleModel streams each of its answers, in turn, in deltas of three
// bytes.
type trickleModel struct {
	mu      sync.Mutex
	answers []string
}

func (m *trickleModel) Name() string { return "trickle" }

func (m *trickleModel) next() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.answers) == 0 {
		return "{}"
	}
	a := m.answers[0]
	m.answers = m.answers[1:]
	return a
}

func (m *trickleModel) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	var resp *model.Response
	for c, err := range m.GenerateStream(ctx, req) {
		if err != nil {
			return nil, err
		}
		resp = c.Response
	}
	return resp, nil
}

func (m *trickleModel) GenerateStream(ctx context.Context, _ *model.Request) iter.Seq2[model.Chunk, error] {
	text := m.next()
	return func(yield func(model.Chunk, error) bool) {
		for i := 0; i < len(text); i += 3 {
			if err := ctx.Err(); err != nil {
				yield(model.Chunk{}, err)
				return
			}
			if !yield(model.Chunk{Delta: &model.Delta{Text: text[i:min(i+3, len(text))]}}, nil) {
				return
			}
		}
		yield(model.Chunk{Response: &model.Response{Message: model.Message{Role: model.RoleAssistant, Parts: []model.Part{model.TextPart(text)}},
			FinishReason: model.FinishStop}}, nil)
	}
}

type article struct {
	Title string   `json:"title"`
	Words int      `json:"words"`
	Tags  []string `json:"tags"`
	Draft bool     `json:"draft"`
}

// RunStream of a typed agent yields the output as it streams: partial
// values that only grow, the last equal to the validated output.
func TestRunStreamPartialOutput(t *testing.T) {
	e := newEnv(t, nil)
	answer := `{"title": "Streaming \"JSON\" in Go", "words": 1200, "tags": ["go", "json", "streams"], "draft": false}`
	a := serve(t, e, agent.Must(agent.NewTyped[article]("writer", &trickleModel{answers: []string{answer}}, nil)))
	var partials []article
	var raws []string
	var final *agent.OutputEvent
	for ev, err := range a.RunStream(runCtx(t), e.rt, "write", nil) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case agent.EventPartialOutput:
			v, ok := ev.Partial.Value.(article)
			if !ok {
				t.Fatalf("partial value of type %T", ev.Partial.Value)
			}
			if final != nil {
				t.Errorf("a partial output after the output")
			}
			partials = append(partials, v)
			raws = append(raws, string(ev.Partial.JSON))
		case agent.EventOutput:
			final = ev.Output
		}
	}
	if final == nil || final.Status != agent.OutputComplete {
		t.Fatalf("output %+v", final)
	}
	var want article
	if err := json.Unmarshal(final.Content, &want); err != nil {
		t.Fatal(err)
	}
	if len(partials) < 10 {
		t.Fatalf("%d partial outputs for a %d-byte answer in 3-byte deltas: %q", len(partials), len(answer), raws)
	}
	if !reflect.DeepEqual(partials[len(partials)-1], want) {
		t.Errorf("last partial %+v, output %+v", partials[len(partials)-1], want)
	}
	for i := 1; i < len(partials); i++ {
		p, q := partials[i-1], partials[i]
		if raws[i-1] == raws[i] {
			t.Errorf("partial %d repeats %s", i, raws[i])
		}
		grows := strings.HasPrefix(q.Title, p.Title) && strings.HasPrefix(want.Title, q.Title) &&
			(p.Words == 0 || p.Words == q.Words) && (q.Words == 0 || q.Words == want.Words) &&
			len(q.Tags) >= len(p.Tags) && len(q.Tags) <= len(want.Tags)
		for j := range p.Tags {
			grows = grows && strings.HasPrefix(q.Tags[j], p.Tags[j]) && strings.HasPrefix(want.Tags[j], q.Tags[j])
		}
		if !grows {
			t.Errorf("partial %d does not grow from %+v to %+v", i, p, q)
		}
	}
}

// A streamed answer that is not valid output yields partials and fails as
// before: the partial outputs are not validated, the output is.
func TestRunStreamPartialOutputInvalid(t *testing.T) {
	e := newEnv(t, nil)
	bad := `{"title": "Half", "words": "many"}`
	a := serve(t, e, agent.Must(agent.NewTyped[article]("writer2", &trickleModel{answers: []string{bad}}, &agent.Options{MaxRepairs: -1})))
	var partials int
	var failed error
	for ev, err := range a.RunStream(runCtx(t), e.rt, "write", nil) {
		if err != nil {
			failed = err
			break
		}
		if ev.Kind == agent.EventPartialOutput {
			partials++
			if ev.Partial.Value.(article).Words != 0 {
				t.Errorf("a partial output decoded words %+v", ev.Partial.Value)
			}
		}
	}
	var re *agent.RunError
	if !errors.Is(failed, agent.ErrRunFailed) || !errors.As(failed, &re) {
		t.Fatalf("err = %v, want a failed run", failed)
	}
	if partials == 0 {
		t.Errorf("no partial output before the invalid field")
	}
}

// An output type that is not an object streams inside its wrapper, and
// the partial outputs hold the unwrapped value.
func TestRunStreamPartialOutputWrapped(t *testing.T) {
	e := newEnv(t, nil)
	a := serve(t, e, agent.Must(agent.NewTyped[[]string]("lister", &trickleModel{answers: []string{`{"output": ["alpha", "beta"]}`}}, nil)))
	var last []string
	var n int
	for ev, err := range a.RunStream(runCtx(t), e.rt, "list", nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.EventPartialOutput {
			last, n = ev.Partial.Value.([]string), n+1
		}
	}
	if n < 3 || !reflect.DeepEqual(last, []string{"alpha", "beta"}) {
		t.Errorf("%d partial outputs, the last %q", n, last)
	}
}
