package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/calf-go/calf/eval"
	"github.com/joshdk/go-junit"
)

// calf eval runs a set against the built-in assistant, prints a line per
// case with what failed, writes the JSON and JUnit reports, exits 1 when
// a case fails, and fails a case that got worse than in a baseline.
func TestEval(t *testing.T) {
	isolate(t)
	srv, _ := newFakeServer(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `
name: echo
cases:
  - {id: hello, input: hello there, expect: {contains: [hello]}, repeats: 2}
  - {id: bye, input: bye now, expect: {regex: 'You said: bye'}}
`)
	bad := write("bad.jsonl", `{"id":"hello","input":"hello there","expect":{"contains":["hello"]},"repeats":2}
{"id":"bye","input":"bye now","expect":{"contains":["goodbye"]}}
`)
	store := "sqlite:" + filepath.Join(dir, "calf.db")
	base, junitFile := filepath.Join(dir, "base.json"), filepath.Join(dir, "report.xml")
	r := runMain(t.Context(), "", "eval", "--model", srv.URL(), "--store", store, "--id", "g1", "--json", base, good)
	if r.code != exitOK || !strings.Contains(r.stdout, "PASS  hello  2/2 runs passed") || !strings.Contains(r.stdout, "2 of 2 cases passed") ||
		!strings.Contains(r.stderr, "[3/3]") {
		t.Fatalf("a set that passes: %+v", r)
	}
	fh, err := os.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eval.ReadReport(fh)
	_ = fh.Close()
	if err != nil || rep.ID != "g1" || len(rep.Cases) != 2 || rep.Cases[0].Runs[1].RunID != "g1-hello-1" {
		t.Fatalf("the JSON report: %+v, %v", rep, err)
	}

	r = runMain(t.Context(), "", "eval", "--model", srv.URL(), "--store", store, "--junit", junitFile, "--baseline", base, bad)
	if r.code != exitFailure || !strings.Contains(r.stdout, "FAIL  bye  0/1 runs passed") ||
		!strings.Contains(r.stdout, `answer.contains: the answer does not contain "goodbye"`) ||
		!strings.Contains(r.stdout, "worse   bye: 100% -> 0%") || !strings.Contains(r.stderr, "1 of 2 cases got worse") || !strings.Contains(r.stderr, "1 of 2 cases failed") {
		t.Fatalf("a set that fails: %+v", r)
	}
	suites, err := junit.IngestFile(junitFile)
	if err != nil || len(suites) != 1 {
		t.Fatalf("JUnit: %d suites, %v", len(suites), err)
	}
	suites[0].Aggregate()
	if suites[0].Totals.Failed != 1 || suites[0].Totals.Passed != 1 {
		t.Errorf("JUnit totals: %+v", suites[0].Totals)
	}

	for _, tc := range []struct{ args []string }{
		{[]string{"eval", "--model", srv.URL(), write("x.txt", "")}},
		{[]string{"eval", "--model", srv.URL(), write("dup.yaml", "cases: [{id: a, input: x}, {id: a, input: y}]")}},
		{[]string{"eval", "--model", srv.URL(), "--baseline", filepath.Join(dir, "none.json"), good}},
		{[]string{"eval", "--model", srv.URL(), "--concurrency", "0", good}},
	} {
		if r := runMain(t.Context(), "", tc.args...); r.code != exitUsage {
			t.Errorf("%v: %+v", tc.args, r)
		}
	}
}
