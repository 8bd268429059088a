package reactive

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Paths name parts of a state by the JSON names of its fields, map keys
// and slice indexes, separated by '.': "agents.translator.should_act",
// "documents.3.title". The empty path is the whole state.

// fieldIndex maps the JSON names of a struct type's fields to their
// indexes, cached per type.
var fieldIndexes sync.Map // reflect.Type → map[string][]int

func fieldIndex(t reflect.Type) map[string][]int {
	if m, ok := fieldIndexes.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Index
		}
	}
	fieldIndexes.Store(t, m)
	return m
}

func splitPath(path string) []string {
	if path == "" {
		return nil
	}
	return strings.Split(path, ".")
}

// valueAt returns the value at path in v, and whether it exists.
func valueAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, seg := range splitPath(path) {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Struct:
			idx, ok := fieldIndex(v.Type())[seg]
			if !ok {
				return reflect.Value{}, false
			}
			v = v.FieldByIndex(idx)
		case reflect.Map:
			k, err := mapKey(v.Type().Key(), seg)
			if err != nil {
				return reflect.Value{}, false
			}
			v = v.MapIndex(k)
			if !v.IsValid() {
				return reflect.Value{}, false
			}
		case reflect.Slice, reflect.Array:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= v.Len() {
				return reflect.Value{}, false
			}
			v = v.Index(i)
		default:
			return reflect.Value{}, false
		}
	}
	return v, true
}

func mapKey(t reflect.Type, seg string) (reflect.Value, error) {
	switch t.Kind() {
	case reflect.String:
		return reflect.ValueOf(seg).Convert(t), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(seg, 10, 64)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(n).Convert(t), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(seg, 10, 64)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(n).Convert(t), nil
	}
	return reflect.Value{}, fmt.Errorf("map keys of type %s", t)
}

// absence says why a path has no value in a state, so that the value can
// be taken away again exactly: at is the shortest prefix of the path with
// no value (a map key or slice index missing, or a field below a nil
// pointer), and nilParent says that the value holding it is nil (a nil
// pointer, interface, map or slice), not just without that key or index.
type absence struct {
	at        string
	nilParent bool
}

// lookup returns the JSON of the value at path in s; when there is none,
// null and why.
func lookup[S any](s *S, path string) (json.RawMessage, *absence) {
	root := reflect.ValueOf(s).Elem()
	v, ok := valueAt(root, path)
	if !ok {
		segs := splitPath(path)
		for k := 1; k <= len(segs); k++ {
			at := strings.Join(segs[:k], ".")
			if _, ok := valueAt(root, at); ok {
				continue
			}
			parent, _ := valueAt(root, strings.Join(segs[:k-1], "."))
			return json.RawMessage("null"), &absence{at: at, nilParent: isNil(parent)}
		}
		return json.RawMessage("null"), &absence{at: path}
	}
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return json.RawMessage("null"), nil
	}
	return raw, nil
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return v.IsNil()
	}
	return false
}

// setJSONAt returns s with the value at path replaced by raw, copying the
// maps, slices and pointers on the way rather than changing them: the
// state s came from is left as it was. A missing map entry is added, and
// so is a slice's element at the index one past its end.
func setJSONAt[S any](s S, path string, raw json.RawMessage) (S, error) {
	v := reflect.ValueOf(&s).Elem()
	if err := setAt(v, splitPath(path), raw); err != nil {
		return s, fmt.Errorf("reactive: set %q: %w", path, err)
	}
	return s, nil
}

// setAt sets the value at segs below the addressable v to raw.
func setAt(v reflect.Value, segs []string, raw json.RawMessage) error {
	if len(segs) == 0 {
		n := reflect.New(v.Type())
		if err := json.Unmarshal(raw, n.Interface()); err != nil {
			return err
		}
		v.Set(n.Elem())
		return nil
	}
	seg := segs[0]
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		} else {
			cp := reflect.New(v.Type().Elem())
			cp.Elem().Set(v.Elem())
			v.Set(cp)
		}
		return setAt(v.Elem(), segs, raw)
	case reflect.Struct:
		idx, ok := fieldIndex(v.Type())[seg]
		if !ok {
			return fmt.Errorf("%s has no field %q", v.Type(), seg)
		}
		return setAt(v.FieldByIndex(idx), segs[1:], raw)
	case reflect.Map:
		k, err := mapKey(v.Type().Key(), seg)
		if err != nil {
			return err
		}
		cp := reflect.MakeMapWithSize(v.Type(), v.Len()+1)
		iter := v.MapRange()
		for iter.Next() {
			cp.SetMapIndex(iter.Key(), iter.Value())
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		if old := v.MapIndex(k); old.IsValid() {
			elem.Set(old)
		}
		if err := setAt(elem, segs[1:], raw); err != nil {
			return err
		}
		cp.SetMapIndex(k, elem)
		v.Set(cp)
		return nil
	case reflect.Slice:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i > v.Len() {
			return fmt.Errorf("no index %q in a slice of %d", seg, v.Len())
		}
		n := max(v.Len(), i+1) // one more: an append
		cp := reflect.MakeSlice(v.Type(), n, n)
		reflect.Copy(cp, v)
		if err := setAt(cp.Index(i), segs[1:], raw); err != nil {
			return err
		}
		v.Set(cp)
		return nil
	case reflect.Array:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= v.Len() {
			return fmt.Errorf("no index %q in an array of %d", seg, v.Len())
		}
		return setAt(v.Index(i), segs[1:], raw)
	}
	return fmt.Errorf("cannot go into a %s at %q", v.Kind(), seg)
}

// removeJSONAt returns s without the value at a.at: a map entry deleted, a
// slice cut short before the index, or, with a.nilParent, the value
// holding it set to nil; copying the maps, slices and pointers on the way
// as setJSONAt does. What has no value already stays as it is.
func removeJSONAt[S any](s S, a *absence) (S, error) {
	v := reflect.ValueOf(&s).Elem()
	if err := removeAt(v, splitPath(a.at), a.nilParent); err != nil {
		return s, fmt.Errorf("reactive: remove %q: %w", a.at, err)
	}
	return s, nil
}

// removeAt removes the value at segs below the addressable v.
func removeAt(v reflect.Value, segs []string, nilParent bool) error {
	if len(segs) == 0 {
		return errors.New("the whole state cannot be removed")
	}
	if len(segs) == 1 && nilParent {
		if !isNil(v) {
			v.Set(reflect.Zero(v.Type()))
		}
		return nil
	}
	seg := segs[0]
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		cp := reflect.New(v.Type().Elem())
		cp.Elem().Set(v.Elem())
		v.Set(cp)
		return removeAt(v.Elem(), segs, false)
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
	case reflect.Struct:
		idx, ok := fieldIndex(v.Type())[seg]
		if !ok || len(segs) == 1 {
			return fmt.Errorf("the field %q of %s cannot be removed", seg, v.Type())
		}
		return removeAt(v.FieldByIndex(idx), segs[1:], nilParent)
	case reflect.Map:
		k, err := mapKey(v.Type().Key(), seg)
		if err != nil {
			return err
		}
		old := v.MapIndex(k)
		if !old.IsValid() {
			return nil
		}
		cp := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			cp.SetMapIndex(iter.Key(), iter.Value())
		}
		if len(segs) == 1 {
			cp.SetMapIndex(k, reflect.Value{})
			v.Set(cp)
			return nil
		}
		elem := reflect.New(v.Type().Elem()).Elem()
		elem.Set(old)
		if err := removeAt(elem, segs[1:], nilParent); err != nil {
			return err
		}
		cp.SetMapIndex(k, elem)
		v.Set(cp)
		return nil
	case reflect.Slice:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 {
			return fmt.Errorf("no index %q in a slice", seg)
		}
		if i >= v.Len() {
			return nil
		}
		if len(segs) == 1 {
			v.Set(v.Slice3(0, i, i)) // its capacity cut too: an append copies
			return nil
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		if err := removeAt(cp.Index(i), segs[1:], nilParent); err != nil {
			return err
		}
		v.Set(cp)
		return nil
	case reflect.Array:
		i, err := strconv.Atoi(seg)
		if err != nil || i < 0 || i >= v.Len() || len(segs) == 1 {
			return fmt.Errorf("the index %q of an array of %d cannot be removed", seg, v.Len())
		}
		return removeAt(v.Index(i), segs[1:], nilParent)
	}
	return fmt.Errorf("cannot go into a %s at %q", v.Kind(), seg)
}

// comparePaths orders paths segment by segment, indexes by their numbers
// ("tags.9" before "tags.10"), so that the elements a replay adds to a
// slice come in the order of their indexes.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		if x == y {
			continue
		}
		i, errI := strconv.Atoi(x)
		j, errJ := strconv.Atoi(y)
		if errI == nil && errJ == nil {
			return cmp.Compare(i, j)
		}
		return strings.Compare(x, y)
	}
	return cmp.Compare(len(a), len(b))
}
