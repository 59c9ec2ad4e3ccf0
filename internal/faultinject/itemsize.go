package faultinject

import (
	"context"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// ItemSizeMiddlewareID names the item-size enforcement on a middleware stack.
const ItemSizeMiddlewareID = "taskledgerItemSizeLimit"

// The messages DynamoDB sends with the ValidationException.
const (
	msgItemTooLarge   = "Item size has exceeded the maximum allowed size"
	msgUpdateTooLarge = "Item size to update has exceeded the maximum allowed size"
)

// EnforceItemSize registers DynamoDB's 400 KB item limit on a client's
// middleware stack (add it to aws.Config.APIOptions). kumo does not enforce
// the limit and moto applies the write before it errors (and counts sizes
// its own way); through this middleware a PutItem, UpdateItem or
// TransactWriteItems whose new values would exceed itemsize.MaxItemBytes
// fails with a ValidationException carrying DynamoDB's message, and is
// never sent — as DynamoDB refuses it without applying anything.
//
// PutItem and a transaction's Put are sized exactly (package itemsize).
// For UpdateItem and a transaction's Update only the key and the values the
// SET clause assigns are known here, not the attributes the item already
// has: that sum is a sound lower bound (itemsize.UpdateLowerBound), so every
// update refused here would be refused by DynamoDB, while an update that
// only exceeds the limit together with the stored attributes passes. The
// ledger checks the whole item itself before it writes (ledger.CheckCompletion).
func EnforceItemSize(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(ItemSizeMiddlewareID,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) == "DynamoDB" {
				if err := CheckItemSize(in.Parameters); err != nil {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// CheckItemSize returns the ValidationException DynamoDB would send for a
// write input whose item is over the limit (see EnforceItemSize), else nil.
func CheckItemSize(params any) error {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return putSize(in.Item)
	case *dynamodb.UpdateItemInput:
		return updateSize(in.Key, in.UpdateExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			var err error
			switch {
			case it.Put != nil:
				err = putSize(it.Put.Item)
			case it.Update != nil:
				err = updateSize(it.Update.Key, it.Update.UpdateExpression, it.Update.ExpressionAttributeNames, it.Update.ExpressionAttributeValues)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func putSize(item map[string]types.AttributeValue) error {
	if itemsize.Item(item) > itemsize.MaxItemBytes {
		return tooLarge(msgItemTooLarge)
	}
	return nil
}

func updateSize(key map[string]types.AttributeValue, expr *string, names map[string]string, values map[string]types.AttributeValue) error {
	if expr == nil {
		return nil
	}
	if itemsize.UpdateLowerBound(key, *expr, names, values) > itemsize.MaxItemBytes {
		return tooLarge(msgUpdateTooLarge)
	}
	return nil
}

func tooLarge(msg string) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: msg, Fault: smithy.FaultClient}
}
