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
		{"/allOf/0/properties/a", "a"},
		{"/properties/a/anyOf/1/items", "a[]"},
		{"/properties/a/if/then/not", "a"},
		{"/$defs/T/properties/x", "/$defs/T/properties/x"},
		{"/properties", "/properties"},
		{"/allOf", "/allOf"},
	}
	for _, tt := range tests {
		if got := valuePath(tt.ptr); got != tt.want {
			t.Errorf("valuePath(%q) = %q, want %q", tt.ptr, got, tt.want)
		}
	}
}

// The locations are those jsonschema-go's errors list, from the root in.
func TestInstancePath(t *testing.T) {
	tests := []struct {
		name string
		locs []string
		want string
	}{
		{"none", nil, ""},
		{"root", []string{"root"}, ""},
		{"nested", []string{"root", "/properties/a", "/properties/a/properties/b"}, "a.b"},
		{"into $defs", []string{"root", "/properties/home", "/$defs/addr", "/$defs/addr/properties/city"}, "home.city"},
		{"$defs from items", []string{"root", "/properties/a", "/properties/a/items", "/$defs/p", "/$defs/p/properties/x"}, "a[].x"},
		{"$defs from the root", []string{"root", "/$defs/obj", "/$defs/obj/properties/x"}, "x"},
		{"definitions", []string{"root", "/properties/a", "/definitions/p", "/definitions/p/items"}, "a[]"},
		{"$defs to $defs", []string{"root", "/properties/a", "/$defs/p", "/$defs/p/properties/q", "/$defs/q", "/$defs/q/properties/r"}, "a.q.r"},
		{"back to the root", []string{"root", "/properties/kid", "root", "/properties/kid", "root", "/properties/name"}, "kid.kid.name"},
		{"untranslatable", []string{"root", "/properties/a", "/properties/a/contains"}, "/properties/a/contains"},
		{"untranslatable before a $ref", []string{"root", "/properties/a/contains", "/$defs/p", "/$defs/p/properties/x"}, "/$defs/p/properties/x"},
	}
	for _, tt := range tests {
		if got := instancePath(tt.locs); got != tt.want {
			t.Errorf("%s: instancePath(%q) = %q, want %q", tt.name, tt.locs, got, tt.want)
		}
	}
}
