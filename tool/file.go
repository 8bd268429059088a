package tool

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/calf-go/calf/model"
)

// Errors of [FileResult].
var (
	// ErrUnreadableFile: the file is neither text nor an image a model
	// reads, so it cannot be shown to the model.
	ErrUnreadableFile = errors.New("tool: the file is neither text nor an image a model reads")
)

// modelImages are the image types that the models take.
var modelImages = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// FileResult returns a result that shows the model the content data of the
// file path (a name for the model and the application: it is not read).
// The type comes from the path's extension, or from the content when the
// extension names none. An image of a type the models take (PNG, JPEG,
// GIF, WebP) is an image part after a text part that names the file, its
// type and size; other content that is text (valid UTF-8 without NUL
// bytes: source, JSON, SVG, ...) is one text part, "File {path}
// ({type}):" and a new line before the text. Anything else (a PDF, an
// archive, an executable) is refused with an error matching
// [ErrUnreadableFile] that names the file, its type and size, which a tool
// can return as it is: the model is told. The result's Metadata holds the
// path, the type ("mime_type") and the size in bytes ("size").
func FileResult(path string, data []byte) (*Result, error) {
	mt := fileType(path, data)
	meta := map[string]string{"path": path, "mime_type": mt, "size": strconv.Itoa(len(data))}
	switch {
	case modelImages[mt]:
		label := fmt.Sprintf("File %s (%s, %d bytes):", path, mt, len(data))
		return &Result{Parts: []model.Part{model.TextPart(label), model.ImagePart(mt, bytes.Clone(data))}, Metadata: meta}, nil
	case utf8.Valid(data) && bytes.IndexByte(data, 0) < 0:
		return &Result{Parts: []model.Part{model.TextPart(fmt.Sprintf("File %s (%s):\n%s", path, mt, data))}, Metadata: meta}, nil
	}
	return nil, fmt.Errorf("%w: %s is %s (%d bytes)", ErrUnreadableFile, path, mt, len(data))
}

// fileType returns the media type of the file path with content data,
// without parameters.
func fileType(path string, data []byte) string {
	mt := mime.TypeByExtension(filepath.Ext(path))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	if t, _, err := mime.ParseMediaType(mt); err == nil {
		return t
	}
	mt, _, _ = strings.Cut(mt, ";")
	return strings.TrimSpace(mt)
}
