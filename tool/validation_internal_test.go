package tool

import "testing"

func TestValuePath(t *testing.T) {
	tests := []struct{ ptr, want string }{
		{"root", ""},
		{"<anonymous schema>", ""},
		{"/properties/a", "a"},
		{"/properties/a/properties/b", "a.b"},
		{"/properties/tags/items", "tags[]"},
		{"/items/properties/x", "[].x"},
		{"/properties/m/additionalProperties", "m.*"},
		{"/additionalProperties/properties/x", "*.x"},
		{"/prefixItems/1", "[1]"},
		{"/properties/a~1b~0c", "a/b~c"},
		{"/properties/properties", "properties"},
		{"/$defs/T/properties/x", "/$defs/T/properties/x"},
		{"/properties", "/properties"},
	}
	for _, tt := range tests {
		if got := valuePath(tt.ptr); got != tt.want {
			t.Errorf("valuePath(%q) = %q, want %q", tt.ptr, got, tt.want)
		}
	}
}
