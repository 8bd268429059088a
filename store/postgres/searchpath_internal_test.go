package postgres

import "testing"

func TestFirstSchema(t *testing.T) {
	for _, tt := range []struct{ path, want string }{
		{`"$user", public`, "public"},
		{`calf_x`, "calf_x"},
		{`Calf_X, public`, "calf_x"},
		{`"Calf X", public`, "Calf X"},
		{`"a""b"`, `a"b`},
		{` "$user" ,  other`, "other"},
		{`"$user"`, ""},
		{``, ""},
	} {
		if got := firstSchema(tt.path); got != tt.want {
			t.Errorf("firstSchema(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}
