package tool_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/calf-go/calf/model"
	"github.com/calf-go/calf/tool"
)

// FileResult shows text as text labelled with the path, an image as an
// image part, and refuses other content; its metadata names the file.
func TestFileResult(t *testing.T) {
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	src := []byte("package main\n\nfunc main() {}\n")

	r, err := tool.FileResult("cmd/main.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Parts) != 1 || r.Parts[0].Type != model.PartText || !strings.HasPrefix(r.Text(), "File cmd/main.go (") ||
		!strings.HasSuffix(r.Text(), "):\n"+string(src)) {
		t.Errorf("text file: %+v", r.Parts)
	}
	if r.Metadata["path"] != "cmd/main.go" || r.Metadata["size"] != "29" || r.Metadata["mime_type"] == "" {
		t.Errorf("text file's metadata %v", r.Metadata)
	}

	// No extension: the type comes from the content.
	r, err = tool.FileResult("NOTES", []byte("remember the milk"))
	if err != nil || r.Text() != "File NOTES (text/plain):\nremember the milk" || r.Metadata["mime_type"] != "text/plain" {
		t.Errorf("file without extension: %+v, %v", r, err)
	}

	for _, name := range []string{"shot.png", "shot"} {
		r, err = tool.FileResult(name, img.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Parts) != 2 || r.Parts[1].Type != model.PartImage || r.Parts[1].MIMEType != "image/png" ||
			!bytes.Equal(r.Parts[1].Data, img.Bytes()) || !strings.Contains(r.Parts[0].Text, name) {
			t.Errorf("image %s: %+v", name, r.Parts)
		}
		if r.Metadata["mime_type"] != "image/png" {
			t.Errorf("image %s's metadata %v", name, r.Metadata)
		}
	}

	for name, data := range map[string][]byte{
		"report.pdf": []byte("%PDF-1.7\n\x00\x01binary"),
		"blob":       {0x00, 0xff, 0xfe, 0x10},
		"latin1.txt": []byte("caf\xe9"),
	} {
		if r, err := tool.FileResult(name, data); !errors.Is(err, tool.ErrUnreadableFile) || !strings.Contains(err.Error(), name) || r != nil {
			t.Errorf("%s: %+v, %v", name, r, err)
		}
	}
}

// Metadata is copied by Clone and left out of the JSON when empty, so that
// records written before it decode as they did.
func TestResultMetadata(t *testing.T) {
	r := &tool.Result{Parts: []model.Part{model.TextPart("x")}, Metadata: map[string]string{"trace": "t1"}}
	c := r.Clone()
	c.Metadata["trace"] = "t2"
	if r.Metadata["trace"] != "t1" {
		t.Error("a clone shares its metadata")
	}
	b, err := json.Marshal(tool.TextResult("x"))
	if err != nil || strings.Contains(string(b), "metadata") {
		t.Errorf("a result without metadata: %s, %v", b, err)
	}
	var back tool.Result
	if err := json.Unmarshal([]byte(`{"parts":[{"type":"text","text":"5"}],"metadata":{"k":"v"}}`), &back); err != nil || back.Metadata["k"] != "v" {
		t.Errorf("decoded %+v, %v", back, err)
	}
}
