package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DefaultTTL is how long a connection's items live without a $disconnect
// (API Gateway closes a WebSocket connection after 2 hours at most).
const DefaultTTL = 2*time.Hour + 10*time.Minute

// MaxSubscriptions bounds the tasks one connection may subscribe to.
const MaxSubscriptions = 32

// Table is the connections table (ConnectionsTable): partition key pk,
// sort key sk, TTL attribute expires_at. Two kinds of item:
//
//   - a connection: pk "conn#<connection id>", sk "conn", with scope (the
//     caller's, for logs) and task_ids (a string set: what it subscribed
//     to, so $disconnect can delete its subscriptions);
//   - a subscription: pk "task#<task id>", sk the connection id: one Query
//     on pk lists a task's subscribers.
//
// Every item expires (TTL) after TTL, so a connection whose $disconnect
// never ran leaves nothing behind for long.
type Table struct {
	DB               *dynamodb.Client
	ConnectionsTable string
	// TTL is the items' lifetime (DefaultTTL if 0).
	TTL time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

func (t *Table) expires() types.AttributeValue {
	ttl := t.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(now().Add(ttl).Unix(), 10)}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func connKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s("conn#" + id), "sk": s("conn")}
}

// Connect records a connection (one PutItem).
func (t *Table) Connect(ctx context.Context, connectionID, scope string) error {
	item := connKey(connectionID)
	item["scope"] = s(scope)
	item["expires_at"] = t.expires()
	if _, err := t.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &t.ConnectionsTable, Item: item}); err != nil {
		return fmt.Errorf("stream: connect: %w", err)
	}
	return nil
}

// ErrTooManySubscriptions is a subscribe past MaxSubscriptions.
var ErrTooManySubscriptions = errors.New("stream: too many subscriptions on this connection")

// ErrNotConnected is a subscribe on a connection the table does not know
// (its $connect item expired or was deleted).
var ErrNotConnected = errors.New("stream: connection not recorded")

// Subscribe records that connectionID follows taskID: the connection
// item's task_ids first (conditioned on the connection existing and
// having room), then the subscription item (two writes).
func (t *Table) Subscribe(ctx context.Context, connectionID, taskID string) error {
	_, err := t.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &t.ConnectionsTable,
		Key:                      connKey(connectionID),
		UpdateExpression:         aws.String("ADD #t :t"),
		ConditionExpression:      aws.String("attribute_exists(pk) AND (attribute_not_exists(#t) OR size(#t) < :max OR contains(#t, :id))"),
		ExpressionAttributeNames: map[string]string{"#t": "task_ids"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t":   &types.AttributeValueMemberSS{Value: []string{taskID}},
			":id":  s(taskID),
			":max": &types.AttributeValueMemberN{Value: strconv.Itoa(MaxSubscriptions)},
		},
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		// Which condition failed: read the item (rare path).
		out, gerr := t.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.ConnectionsTable, Key: connKey(connectionID), ConsistentRead: aws.Bool(true)})
		if gerr == nil && len(out.Item) == 0 {
			return ErrNotConnected
		}
		return ErrTooManySubscriptions
	}
	if err != nil {
		return fmt.Errorf("stream: subscribe: %w", err)
	}
	_, err = t.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: &t.ConnectionsTable, Item: map[string]types.AttributeValue{
		"pk": s("task#" + taskID), "sk": s(connectionID), "expires_at": t.expires(),
	}})
	if err != nil {
		return fmt.Errorf("stream: subscribe: %w", err)
	}
	return nil
}

// Subscribers lists the connections following taskID (one Query,
// eventually consistent: a subscription a moment old may be missing; the
// next poll finds it).
func (t *Table) Subscribers(ctx context.Context, taskID string) ([]string, error) {
	var ids []string
	var start map[string]types.AttributeValue
	for {
		out, err := t.DB.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &t.ConnectionsTable,
			KeyConditionExpression:    aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s("task#" + taskID)},
			ProjectionExpression:      aws.String("sk"),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("stream: subscribers: %w", err)
		}
		for _, it := range out.Items {
			if v, ok := it["sk"].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return ids, nil
		}
		start = out.LastEvaluatedKey
	}
}

// Unsubscribe deletes one subscription (a connection found gone).
func (t *Table) Unsubscribe(ctx context.Context, connectionID, taskID string) error {
	_, err := t.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &t.ConnectionsTable, Key: map[string]types.AttributeValue{
		"pk": s("task#" + taskID), "sk": s(connectionID)}})
	if err != nil {
		return fmt.Errorf("stream: unsubscribe: %w", err)
	}
	return nil
}

// Disconnect deletes a connection and its subscriptions (one consistent
// read, one delete per subscription, one for the connection).
func (t *Table) Disconnect(ctx context.Context, connectionID string) error {
	out, err := t.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.ConnectionsTable, Key: connKey(connectionID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("stream: disconnect: %w", err)
	}
	var errs []error
	if ids, ok := out.Item["task_ids"].(*types.AttributeValueMemberSS); ok {
		for _, id := range ids.Value {
			errs = append(errs, t.Unsubscribe(ctx, connectionID, id))
		}
	}
	if _, err := t.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &t.ConnectionsTable, Key: connKey(connectionID)}); err != nil {
		errs = append(errs, fmt.Errorf("stream: disconnect: %w", err))
	}
	return errors.Join(errs...)
}
