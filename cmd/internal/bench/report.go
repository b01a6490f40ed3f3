package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// Write prints one scenario result: as one JSON object on one line when
// asJSON, else as a two-column table of the same field names.
func Write(w io.Writer, result any, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(result)
		if err != nil {
			return fmt.Errorf("bench: encoding result: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeFields(tw, "", reflect.ValueOf(result))
	fmt.Fprintln(tw)
	return tw.Flush()
}

// writeFields prints v's exported fields, named by their JSON tags,
// flattening embedded structs and listing slices of structs row by row.
func writeFields(w io.Writer, prefix string, v reflect.Value) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return // an optional part of a result, absent (as JSON omits it)
		}
		v = v.Elem()
	}
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		if f.Anonymous {
			writeFields(w, prefix, fv)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			for j := range fv.Len() {
				writeFields(w, fmt.Sprintf("%s%s[%d].", prefix, name, j), fv.Index(j))
			}
			continue
		}
		if fv.Kind() == reflect.String && fv.Len() == 0 {
			continue
		}
		fmt.Fprintf(w, "%s%s\t%v\n", prefix, name, fv.Interface())
	}
}
