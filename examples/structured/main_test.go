package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/calf-go/calf/model/modeltest"
)

func TestExtract(t *testing.T) {
	want := Person{Name: "Ada Lovelace", BirthYear: 1815, Birthplace: "London", Roles: []string{"mathematician"}}
	m := modeltest.NewTestModel(
		modeltest.Text(`{"name": "Ada Lovelace", "birth_year": "1815"}`), // invalid: repaired
		modeltest.JSON(want),
	)
	got, err := extract(t.Context(), m, "Ada Lovelace, born 1815 in London, mathematician")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("person (-want +got):\n%s", diff)
	}
	if m.Calls() != 2 {
		t.Errorf("model calls = %d, want 2 (one repair)", m.Calls())
	}
}
