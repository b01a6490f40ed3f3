package payloadfmt

import "testing"

// TestPreview: text when printable UTF-8, cut to the width; otherwise the
// size and first bytes in hex, with no control byte in the output.
func TestPreview(t *testing.T) {
	long := make([]byte, 40)
	for i := range long {
		long[i] = byte(i)
	}
	for _, c := range []struct {
		in   []byte
		max  int
		want string
	}{
		{nil, 10, ""},
		{[]byte(`{"a":1}`), 10, `{"a":1}`},
		{[]byte("héllo wörld"), 5, "héll…"},
		{[]byte{0xff, 0xfe}, 10, "<2 bytes: fffe>"},
		{[]byte("\x1b[31mred"), 40, "<8 bytes: 1b5b33316d726564>"},
		{[]byte("two\nlines"), 40, "<9 bytes: 74776f0a6c696e6573>"},
		{long, 40, "<40 bytes: 000102030405060708090a0b0c0d0e0f…>"},
	} {
		if got := Preview(c.in, c.max); got != c.want {
			t.Errorf("Preview(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	if !Printable([]byte("two\nlines\tand tabs"), true) || Printable([]byte("bell\a"), true) || Printable([]byte{0xff}, true) {
		t.Error("Printable with multiline: lines and tabs only")
	}
}
