package faultinject

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// PlaceholdersMiddlewareID names the placeholder check on a middleware stack.
const PlaceholdersMiddlewareID = "taskledgerAmbiguousPlaceholders"

// RefuseAmbiguousNames registers, on a DynamoDB client's middleware stack,
// a check that refuses (before sending) a request whose expression
// attribute name placeholders an emulator would resolve differently from
// DynamoDB. kumo (v0.33) replaces each placeholder by its name with a
// textual ReplaceAll, in map order: with "#s" → "slots" and "#sr" →
// "sealed", "#sr" may become "slotsr", so a condition is evaluated on an
// attribute nobody named and a test passes or fails for the wrong reason.
// DynamoDB parses placeholders as tokens. A pair where one placeholder is a
// prefix of the other is harmless only when the textual result is the same
// (as with the ledger's "#"+attribute convention: "#lease" inside
// "#lease_owner" still reads "lease_owner"). internal/testenv registers it on
// every test client, so such an expression fails every test that sends it.
func RefuseAmbiguousNames(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(PlaceholdersMiddlewareID,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) == "DynamoDB" {
				if err := CheckNames(in.Parameters); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, fmt.Errorf("%s: %w", awsmiddleware.GetOperationName(ctx), err)
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// CheckNames returns an error naming the first ambiguous pair of
// placeholders in any ExpressionAttributeNames of params (a DynamoDB input,
// transactions and batches included), else nil.
func CheckNames(params any) error {
	var err error
	walkNames(reflect.ValueOf(params), func(names map[string]string) {
		if err == nil {
			err = ambiguous(names)
		}
	})
	return err
}

func ambiguous(names map[string]string) error {
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, short := range keys {
		for _, long := range keys {
			if long == short || !strings.HasPrefix(long, short) {
				continue
			}
			if names[short]+long[len(short):] != names[long] {
				return fmt.Errorf("faultinject: expression attribute name placeholder %q (%q) is a prefix of %q (%q): an emulator that substitutes names textually (kumo) would read %q, DynamoDB %q; rename one placeholder",
					short, names[short], long, names[long], names[short]+long[len(short):], names[long])
			}
		}
	}
	return nil
}

var namesType = reflect.TypeOf(map[string]string(nil))

// walkNames calls f with every ExpressionAttributeNames map reachable from
// v through pointers, structs, slices and maps.
func walkNames(v reflect.Value, f func(map[string]string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkNames(v.Elem(), f)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			fv := v.Field(i)
			if t.Field(i).Name == "ExpressionAttributeNames" && fv.Type() == namesType {
				if !fv.IsNil() {
					f(fv.Interface().(map[string]string))
				}
				continue
			}
			walkNames(fv, f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkNames(v.Index(i), f)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Struct || v.Type().Elem().Kind() == reflect.Pointer {
			for _, k := range v.MapKeys() {
				walkNames(v.MapIndex(k), f)
			}
		}
	}
}
