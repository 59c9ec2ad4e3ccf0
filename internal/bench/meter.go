package bench

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/taskledger/taskledger/pkg/ledger/itemsize"
)

// meter is SDK middleware computing what the calls of one component bill:
// DynamoDB request units from item sizes (itemsize, DynamoDB's rules),
// SQS requests from payload sizes (64 KB chunks), S3 requests by tier. For
// a DynamoDB write it reads the item before and after the write through
// probe, an uncounted client, because an UpdateItem bills the larger of
// the two; so a metered component must not write the same item
// concurrently with another writer (the cost runs go one task at a time).
// A write also bills the updates it makes to the table's global secondary
// indexes (indexWriteUnits): the meter reads each table's indexes once.
// It also asks DynamoDB for ConsumedCapacity (TOTAL) and adds up what the
// emulator returns, for the cross-check.
//
// A probe that fails is retried (probeAttempts); one that still fails is
// never papered over — an item sized from a stale or missing read would
// bill a silently wrong number — nor turned into a failure of the metered
// call (the system under test must not see the meter): the call goes on,
// and err() reports the first such failure, which fails the row.
type meter struct {
	probe *dynamodb.Client

	mu      sync.Mutex
	schemas map[string]tableSchema // table → key and indexes
	u       usage
	failed  error // the first probe that failed after its retries
}

// probeAttempts bounds the meter's reads of one item or table schema;
// probeBackoff is the wait before the second, doubling after.
const (
	probeAttempts = 5
	probeBackoff  = 20 * time.Millisecond
)

// usage is what a set of calls bills, in billing units.
type usage struct {
	WRU, RRU float64
	// Reported are the capacity units the emulator returned in
	// ConsumedCapacity; ReportedCalls the DynamoDB calls that returned
	// any, of DynamoCalls.
	Reported                   float64
	ReportedCalls, DynamoCalls int
	SQSRequests                float64
	// EmptyReceives are receives that returned no message: the event
	// source's idle polling, billed per poller and hour, not per task.
	EmptyReceives int
	// Receives are receives that returned messages.
	Receives     int
	S3Put, S3Get float64
	// Presigns are presigned URLs made: they pass the middleware stack
	// but send nothing (the client's request is billed where it is made).
	Presigns int
	// IndexWRU are the write units of WRU billed in each global
	// secondary index, by index name.
	IndexWRU map[string]float64
}

func (u *usage) add(v usage) {
	u.WRU += v.WRU
	u.RRU += v.RRU
	u.Reported += v.Reported
	u.ReportedCalls += v.ReportedCalls
	u.DynamoCalls += v.DynamoCalls
	u.SQSRequests += v.SQSRequests
	u.EmptyReceives += v.EmptyReceives
	u.Receives += v.Receives
	u.S3Put += v.S3Put
	u.S3Get += v.S3Get
	u.Presigns += v.Presigns
	for k, n := range v.IndexWRU {
		if u.IndexWRU == nil {
			u.IndexWRU = map[string]float64{}
		}
		u.IndexWRU[k] += n
	}
}

// sub takes v away from u (what was billed between two snapshots).
func (u *usage) sub(v usage) {
	u.WRU -= v.WRU
	u.RRU -= v.RRU
	u.Reported -= v.Reported
	u.ReportedCalls -= v.ReportedCalls
	u.DynamoCalls -= v.DynamoCalls
	u.SQSRequests -= v.SQSRequests
	u.EmptyReceives -= v.EmptyReceives
	u.Receives -= v.Receives
	u.S3Put -= v.S3Put
	u.S3Get -= v.S3Get
	u.Presigns -= v.Presigns
	for k, n := range v.IndexWRU {
		if u.IndexWRU == nil {
			u.IndexWRU = map[string]float64{}
		}
		u.IndexWRU[k] -= n
	}
}

func newMeter(probe *dynamodb.Client) *meter {
	return &meter{probe: probe, schemas: map[string]tableSchema{}}
}

func (m *meter) usage() usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	u.IndexWRU = nil
	u.add(usage{IndexWRU: m.u.IndexWRU}) // a copy of the map
	return u
}

// err returns the first probe failure (nil: every write was sized from
// the items it touched).
func (m *meter) err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

func (m *meter) fail(op string, err error) {
	m.mu.Lock()
	if m.failed == nil {
		m.failed = fmt.Errorf("bench: meter: %s: %w (after %d reads; the call's units cannot be sized)", op, err, probeAttempts)
	}
	m.mu.Unlock()
}

func (m *meter) record(v usage) {
	m.mu.Lock()
	m.u.add(v)
	m.mu.Unlock()
}

// register adds the meter to a middleware stack, after the call counter.
func (m *meter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchMeter", m.handle), middleware.After)
}

func (m *meter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	switch awsmiddleware.GetServiceID(ctx) {
	case "DynamoDB":
		return m.dynamo(ctx, in, next)
	case "SQS":
		out, md, err := next.HandleInitialize(ctx, in)
		if err == nil {
			m.record(sqsUsage(in.Parameters, out.Result))
		}
		return out, md, err
	case "S3":
		out, md, err := next.HandleInitialize(ctx, in)
		if _, presigned := out.Result.(*v4.PresignedHTTPRequest); presigned {
			m.record(usage{Presigns: 1})
			return out, md, err
		}
		switch awsmiddleware.GetOperationName(ctx) {
		case "PutObject", "CopyObject", "PostObject", "ListObjects", "ListObjectsV2", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload":
			m.record(usage{S3Put: 1})
		default:
			m.record(usage{S3Get: 1})
		}
		return out, md, err
	}
	return next.HandleInitialize(ctx, in)
}

func sqsUsage(params, result any) usage {
	switch in := params.(type) {
	case *sqs.SendMessageInput:
		n := len(aws.ToString(in.MessageBody))
		for k, v := range in.MessageAttributes {
			n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
		}
		return usage{SQSRequests: SQSRequests(n)}
	case *sqs.SendMessageBatchInput:
		n := 0
		for _, e := range in.Entries {
			n += len(aws.ToString(e.MessageBody))
		}
		return usage{SQSRequests: SQSRequests(n)}
	case *sqs.ReceiveMessageInput:
		out, _ := result.(*sqs.ReceiveMessageOutput)
		if out == nil || len(out.Messages) == 0 {
			return usage{EmptyReceives: 1}
		}
		n := 0
		for _, msg := range out.Messages {
			n += len(aws.ToString(msg.Body))
		}
		return usage{SQSRequests: SQSRequests(n), Receives: 1}
	}
	return usage{SQSRequests: 1}
}

// target is one item a write touches.
type target struct {
	table string
	key   map[string]types.AttributeValue
	// put is the new item of a Put (sized exactly, not probed after).
	put map[string]types.AttributeValue
}

func (m *meter) dynamo(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var targets []target
	transactional := false
	total := types.ReturnConsumedCapacityTotal
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		p.ReturnConsumedCapacity = total
		targets = append(targets, target{table: aws.ToString(p.TableName), put: p.Item})
	case *dynamodb.UpdateItemInput:
		p.ReturnConsumedCapacity = total
		targets = append(targets, target{table: aws.ToString(p.TableName), key: p.Key})
	case *dynamodb.DeleteItemInput:
		p.ReturnConsumedCapacity = total
		targets = append(targets, target{table: aws.ToString(p.TableName), key: p.Key})
	case *dynamodb.TransactWriteItemsInput:
		p.ReturnConsumedCapacity = total
		transactional = true
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				targets = append(targets, target{table: aws.ToString(it.Put.TableName), put: it.Put.Item})
			case it.Update != nil:
				targets = append(targets, target{table: aws.ToString(it.Update.TableName), key: it.Update.Key})
			case it.Delete != nil:
				targets = append(targets, target{table: aws.ToString(it.Delete.TableName), key: it.Delete.Key})
			case it.ConditionCheck != nil:
				targets = append(targets, target{table: aws.ToString(it.ConditionCheck.TableName), key: it.ConditionCheck.Key})
			}
		}
	case *dynamodb.GetItemInput:
		p.ReturnConsumedCapacity = total
	case *dynamodb.BatchGetItemInput:
		p.ReturnConsumedCapacity = total
	case *dynamodb.QueryInput:
		p.ReturnConsumedCapacity = total
	case *dynamodb.ScanInput:
		p.ReturnConsumedCapacity = total
	}
	op := awsmiddleware.GetOperationName(ctx)
	before := make([]map[string]types.AttributeValue, len(targets))
	schemas := make([]tableSchema, len(targets))
	sized := true // every target's schema and item before were read
	for i := range targets {
		sc, err := m.schema(ctx, targets[i].table)
		if err != nil {
			m.fail(op+": describe "+targets[i].table, err)
			sized = false
			break
		}
		schemas[i] = sc
		if targets[i].put != nil {
			targets[i].key = sc.keyOf(targets[i].put)
		}
		it, err := m.item(ctx, targets[i].table, targets[i].key)
		if err != nil {
			m.fail(op+": read the item before the write", err)
			sized = false
			break
		}
		before[i] = it
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if !sized {
		return out, md, err
	}
	v := usage{DynamoCalls: 1}
	// What the write did, whatever its caller heard: an error may come
	// after the write was applied (a reply lost, or the SDK's retry of an
	// applied write refused by its own effect — the ledger then finds its
	// write by its nonce), so a write that ended in an error is billed by
	// the item read after it: changed, as applied; else a refused
	// condition bills the item as it is, and anything else nothing.
	if err != nil && len(targets) == 0 {
		return out, md, err // a read not performed: nothing billed
	}
	afters := make([]map[string]types.AttributeValue, len(targets))
	changed := false
	for i, t := range targets {
		if err == nil && t.put != nil {
			afters[i] = t.put // a Put's new item, sized exactly
			continue
		}
		a, perr := m.item(ctx, t.table, t.key)
		if perr != nil {
			m.fail(op+": read the item after the write", perr)
			return out, md, err
		}
		afters[i] = a
		changed = changed || !reflect.DeepEqual(a, before[i])
	}
	if err != nil && !changed {
		var ccf *types.ConditionalCheckFailedException
		var tc *types.TransactionCanceledException
		if !errors.As(err, &ccf) && !errors.As(err, &tc) {
			return out, md, err // not performed: nothing billed
		}
	}
	for i := range targets {
		v.WRU += WriteUnits(itemsize.Item(before[i]), itemsize.Item(afters[i]), transactional)
		for name, n := range indexWriteUnits(schemas[i].indexes, before[i], afters[i]) {
			v.WRU += n
			if v.IndexWRU == nil {
				v.IndexWRU = map[string]float64{}
			}
			v.IndexWRU[name] += n
		}
	}
	if err == nil {
		switch p := in.Parameters.(type) {
		case *dynamodb.GetItemInput:
			// Billed on the whole item, whatever the projection.
			if o, _ := out.Result.(*dynamodb.GetItemOutput); o != nil && len(o.Item) > 0 {
				it, serr := m.item(ctx, aws.ToString(p.TableName), p.Key)
				if serr != nil {
					m.fail(op+": read the whole item a GetItem bills", serr)
					return out, md, err
				}
				v.RRU += ReadUnits(itemsize.Item(it), aws.ToBool(p.ConsistentRead), false)
			} else {
				v.RRU += ReadUnits(0, aws.ToBool(p.ConsistentRead), false)
			}
		case *dynamodb.QueryInput:
			if o, _ := out.Result.(*dynamodb.QueryOutput); o != nil {
				// An index query bills its entries as the index holds
				// them (kumo returns whole items from an INCLUDE index).
				project := func(it map[string]types.AttributeValue) map[string]types.AttributeValue { return it }
				if ix := aws.ToString(p.IndexName); ix != "" {
					sc, serr := m.schema(ctx, aws.ToString(p.TableName))
					if serr != nil {
						m.fail(op+": describe "+aws.ToString(p.TableName), serr)
						return out, md, err
					}
					for _, g := range sc.indexes {
						if g.name == ix {
							project = g.entry
						}
					}
				}
				n := 0
				for _, it := range o.Items {
					n += itemsize.Item(project(it))
				}
				v.RRU += ReadUnits(n, aws.ToBool(p.ConsistentRead), false)
			}
		case *dynamodb.BatchGetItemInput:
			// Each item billed on its own: one unit per started 4 KB
			// (halved when eventually consistent), an item not found as
			// one of size 0 (developer guide, "Read and write
			// operations": BatchGetItem).
			if o, _ := out.Result.(*dynamodb.BatchGetItemOutput); o != nil {
				for table, ka := range p.RequestItems {
					got := o.Responses[table]
					for _, it := range got {
						v.RRU += ReadUnits(itemsize.Item(it), aws.ToBool(ka.ConsistentRead), false)
					}
					missing := len(ka.Keys) - len(got) - len(o.UnprocessedKeys[table].Keys)
					v.RRU += float64(max(missing, 0)) * ReadUnits(0, aws.ToBool(ka.ConsistentRead), false)
				}
			}
		case *dynamodb.ScanInput:
			if o, _ := out.Result.(*dynamodb.ScanOutput); o != nil {
				n := 0
				for _, it := range o.Items {
					n += itemsize.Item(it)
				}
				v.RRU += ReadUnits(n, aws.ToBool(p.ConsistentRead), false)
			}
		}
		if cc := consumed(out.Result); cc != nil && cc.CapacityUnits != nil {
			v.Reported += *cc.CapacityUnits
			v.ReportedCalls++
		}
	}
	m.record(v)
	return out, md, err
}

func consumed(result any) *types.ConsumedCapacity {
	switch o := result.(type) {
	case *dynamodb.PutItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.UpdateItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.DeleteItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.GetItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.QueryOutput:
		return o.ConsumedCapacity
	case *dynamodb.ScanOutput:
		return o.ConsumedCapacity
	case *dynamodb.BatchGetItemOutput:
		if len(o.ConsumedCapacity) == 0 {
			return nil
		}
		var sum float64
		for _, c := range o.ConsumedCapacity {
			sum += aws.ToFloat64(c.CapacityUnits)
		}
		return &types.ConsumedCapacity{CapacityUnits: &sum}
	case *dynamodb.TransactWriteItemsOutput:
		if len(o.ConsumedCapacity) == 0 {
			return nil
		}
		var sum float64
		for _, c := range o.ConsumedCapacity {
			sum += aws.ToFloat64(c.CapacityUnits)
		}
		return &types.ConsumedCapacity{CapacityUnits: &sum}
	}
	return nil
}

// item returns the stored item (nil when absent), read strongly
// consistently through the uncounted probe client, retried.
func (m *meter) item(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	var it map[string]types.AttributeValue
	err := probe(ctx, func(ctx context.Context) error {
		out, err := m.probe.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil {
			it = out.Item
		}
		return err
	})
	return it, err
}

// probe runs read up to probeAttempts times, backing off between them. It
// reads on a context that outlives the metered call's (a caller giving up
// does not make the meter guess), bounded by a minute.
func probe(ctx context.Context, read func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	wait := probeBackoff
	var err error
	for range probeAttempts {
		if err = read(ctx); err == nil {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		wait *= 2
	}
	return err
}

// tableSchema is what the meter needs of a table: its key attribute names
// and its global secondary indexes.
type tableSchema struct {
	keys    []string
	indexes []indexSchema
}

// indexSchema is one global secondary index: its key attribute names and
// what it projects beyond the keys (all attributes, or the names listed).
type indexSchema struct {
	name    string
	keys    []string
	all     bool
	include []string
}

// keyOf returns the table key attributes of item.
func (s tableSchema) keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{}
	for _, n := range s.keys {
		key[n] = item[n]
	}
	return key
}

// schema returns table's key and indexes, read once through the probe
// client.
func (m *meter) schema(ctx context.Context, table string) (tableSchema, error) {
	m.mu.Lock()
	sc, ok := m.schemas[table]
	m.mu.Unlock()
	if ok {
		return sc, nil
	}
	var out *dynamodb.DescribeTableOutput
	err := probe(ctx, func(ctx context.Context) error {
		var err error
		out, err = m.probe.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		return err
	})
	if err != nil {
		return tableSchema{}, err
	}
	for _, k := range out.Table.KeySchema {
		sc.keys = append(sc.keys, aws.ToString(k.AttributeName))
	}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		ix := indexSchema{name: aws.ToString(g.IndexName), keys: append([]string(nil), sc.keys...)}
		for _, k := range g.KeySchema {
			ix.keys = append(ix.keys, aws.ToString(k.AttributeName))
		}
		if g.Projection != nil {
			switch g.Projection.ProjectionType {
			case types.ProjectionTypeAll:
				ix.all = true
			case types.ProjectionTypeInclude:
				ix.include = g.Projection.NonKeyAttributes
			}
		}
		sc.indexes = append(sc.indexes, ix)
	}
	m.mu.Lock()
	m.schemas[table] = sc
	m.mu.Unlock()
	return sc, nil
}

// entry returns the index entry of item: nil when the item lacks one of
// the index's key attributes (a sparse index leaves it out), else the
// table and index keys and the projected attributes.
func (ix indexSchema) entry(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	e := map[string]types.AttributeValue{}
	for _, k := range ix.keys {
		v, ok := item[k]
		if !ok {
			return nil
		}
		e[k] = v
	}
	if ix.all {
		return item
	}
	for _, n := range ix.include {
		if v, ok := item[n]; ok {
			e[n] = v
		}
	}
	return e
}

// indexWriteUnits returns the write units a write from before to after
// (nil: no item) bills in the table's global secondary indexes, by
// DynamoDB's rules (developer guide, "Provisioned throughput considerations
// for global secondary indexes", GSI.html#GSI.Writes; on-demand bills the
// same units as write request units): an item entering an index is one
// index write, an item leaving it one, a changed index key value two (the
// old entry deleted, the new one put), a changed projected attribute one;
// each sized by the index entry, one unit per started KB. A transaction's
// index updates propagate after it commits and are priced as ordinary
// writes here.
func indexWriteUnits(indexes []indexSchema, before, after map[string]types.AttributeValue) map[string]float64 {
	u := map[string]float64{}
	for _, ix := range indexes {
		b, a := ix.entry(before), ix.entry(after)
		switch {
		case b == nil && a == nil:
		case b == nil:
			u[ix.name] += WriteUnits(0, itemsize.Item(a), false)
		case a == nil:
			u[ix.name] += WriteUnits(itemsize.Item(b), 0, false)
		case !sameAttributes(ix.keys, b, a):
			u[ix.name] += WriteUnits(itemsize.Item(b), 0, false) + WriteUnits(0, itemsize.Item(a), false)
		case !reflect.DeepEqual(b, a):
			u[ix.name] += WriteUnits(itemsize.Item(b), itemsize.Item(a), false)
		}
	}
	return u
}

// sameAttributes says whether a and b hold equal values under names.
func sameAttributes(names []string, a, b map[string]types.AttributeValue) bool {
	for _, n := range names {
		if !reflect.DeepEqual(a[n], b[n]) {
			return false
		}
	}
	return true
}
