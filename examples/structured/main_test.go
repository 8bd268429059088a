package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/examples/internal/extest"
	"github.com/calf-go/calf/model/modeltest"
)

// TestExtract runs the example through model/openai, replaying
// testdata/extract.httprr: a first answer that fails the schema (a year
// as a string, fields missing), the validation error sent back, and a
// repaired answer. The committed cassette was recorded against a local
// OpenAI-compatible server (model/modeltest's) answering with the script
// below; to record it against a real provider instead (which may answer
// right the first time):
//
//	CALF_RECORD=1 OPENAI_API_KEY=... go test -run '^TestExtract$' ./examples/structured
func TestExtract(t *testing.T) {
	want := Person{Name: "Ada Lovelace", BirthYear: 1815, Birthplace: "London", Roles: []string{"mathematician"}}
	m := extest.Model(t, "testdata/extract.httprr", modeltest.NewTestModel(
		modeltest.Text(`{"name": "Ada Lovelace", "birth_year": "1815"}`), // invalid: repaired
		modeltest.JSON(want),
	).Generate)
	got, err := extract(t.Context(), m, "Ada Lovelace, born 1815 in London, mathematician")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("person (-want +got):\n%s", diff)
	}
}
