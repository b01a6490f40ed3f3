package bench

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// A configuration struct carries its command-line flags in field tags, so
// that the flag, its default and the Go API's default are one line:
//
//	flag    the flag's name (no flag without it)
//	default what a zero field becomes, and the flag's default
//	cli     the flag's default alone, for a field whose zero means
//	        something to the Go API (KillEvery 0: kill none)
//	usage   the flag's help
//
// Fields are int, time.Duration, string, bool, or []int (a comma-separated
// list of positive counts).

// withDefaults fills each zero field of the struct cfg points to from its
// default tag.
func withDefaults(cfg any) {
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		if d := v.Type().Field(i).Tag.Get("default"); d != "" && v.Field(i).IsZero() {
			if err := setField(v.Field(i), "", d); err != nil {
				panic(fmt.Sprintf("bench: default tag of %s.%s: %v", v.Type(), v.Type().Field(i).Name, err))
			}
		}
	}
}

// Flags returns the flags of the configuration struct cfg points to.
func Flags(cfg any) []cli.Flag {
	var out []cli.Flag
	t := reflect.TypeOf(cfg).Elem()
	for i := range t.NumField() {
		f := t.Field(i)
		name, usage, def := f.Tag.Get("flag"), f.Tag.Get("usage"), f.Tag.Get("default")+f.Tag.Get("cli")
		if name == "" {
			continue
		}
		v := reflect.New(f.Type).Elem()
		if def != "" && f.Type.Kind() != reflect.Slice {
			if err := setField(v, name, def); err != nil {
				panic(fmt.Sprintf("bench: default tag of %s.%s: %v", t, f.Name, err))
			}
		}
		switch x := v.Interface().(type) {
		case time.Duration:
			out = append(out, &cli.DurationFlag{Name: name, Usage: usage, Value: x})
		case int:
			out = append(out, &cli.IntFlag{Name: name, Usage: usage, Value: x})
		case bool:
			out = append(out, &cli.BoolFlag{Name: name, Usage: usage})
		default: // string and []int
			out = append(out, &cli.StringFlag{Name: name, Usage: usage, Value: def})
		}
	}
	return out
}

// FromFlags sets each flagged field of the struct cfg points to from the
// command line.
func FromFlags(c *cli.Context, cfg any) error {
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("flag")
		if name == "" || c.Value(name) == nil {
			continue
		}
		if err := setField(v.Field(i), name, fmt.Sprint(c.Value(name))); err != nil {
			return err
		}
	}
	return nil
}

// setField sets v, of one of the kinds above, from s, the value of the
// flag name (empty for a tag).
func setField(v reflect.Value, name, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("--%s %q: %w", name, s, err)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Int:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return fmt.Errorf("--%s %q: %w", name, s, err)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("--%s %q: %w", name, s, err)
		}
		v.SetBool(b)
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Slice && s == "":
		v.Set(reflect.MakeSlice(v.Type(), 0, 0)) // none, not the default
	case v.Kind() == reflect.Slice:
		var out []int
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("--%s %q: %q is not a positive count; use e.g. 10000,1000000", name, s, f)
			}
			out = append(out, n)
		}
		v.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("bench: a %s field cannot be a flag", v.Type())
	}
	return nil
}
