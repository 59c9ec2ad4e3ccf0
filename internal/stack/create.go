package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// Names are the physical names of the resources the code depends on,
// by their fixed logical ids in template.yaml.
type Names struct {
	TasksTable, ReviewTable                string // TasksTable, ReviewTable
	TaskQueueURL, TaskQueueARN             string // TaskQueue
	DeadLetterQueueURL, DeadLetterQueueARN string // TaskDeadLetterQueue
	// PayloadBucket is set by CreateBuckets (the claim-check bucket).
	PayloadBucket string // PayloadBucket
	// ConnectionsTable holds the WebSocket subscriptions of streamed
	// replies.
	ConnectionsTable string // ConnectionsTable
	// WatchTable holds a watch item per submitted task and the
	// reconciler's cursor per shard (ledger.Config.WatchTable).
	WatchTable string // WatchTable
}

// How long Create waits for a table to become ACTIVE.
const tableActiveTimeout = 5 * time.Minute

// Create makes every AWS::DynamoDB::Table and AWS::SQS::Queue in the
// template whose Condition (if any) holds under the default parameters,
// named prefix+"-"+LogicalId, in dependency order, and returns the
// names of the ones the code uses. See the package documentation for what is
// applied, what is skipped and how existing resources are reused. progress,
// if non-nil, gets one line per resource ("created table t42-TasksTable",
// "reused queue t42-TaskQueue").
func (t *Template) Create(ctx context.Context, ddb *dynamodb.Client, sq *sqs.Client, prefix string, progress func(string)) (Names, error) {
	if prefix == "" {
		return Names{}, errors.New("stack: create: empty prefix")
	}
	if progress == nil {
		progress = func(string) {}
	}
	order, err := t.creationOrder()
	if err != nil {
		return Names{}, fmt.Errorf("stack: create: %w", err)
	}

	ev := newEvaluator(t, ddb.Options().Region, prefix)
	for _, id := range order {
		r := t.resources[id]
		if r.Condition != "" {
			// A resource the default parameters do not deploy (an optional
			// part of the stack) is not created locally either.
			on, err := ev.condition(r.Condition)
			if err != nil {
				return Names{}, fmt.Errorf("stack: create %s: %w", id, err)
			}
			if !on {
				continue
			}
		}
		v, err := ev.eval(r.Properties, id)
		if err != nil {
			return Names{}, fmt.Errorf("stack: create %s: %w", id, err)
		}
		props := v.(map[string]any)
		name := prefix + "-" + id

		switch r.Type {
		case typeTable:
			tbl, created, err := createTable(ctx, ddb, name, id, props)
			if err != nil {
				return Names{}, fmt.Errorf("stack: create table %s: %w", name, err)
			}
			ev.refs[id] = name
			ev.attrs[id] = map[string]string{"Arn": aws.ToString(tbl.TableArn)}
			if tbl.LatestStreamArn != nil {
				ev.attrs[id]["StreamArn"] = *tbl.LatestStreamArn
			}
			progress(verb(created) + " table " + name)
		case typeQueue:
			q, created, err := createQueue(ctx, sq, name, id, props)
			if err != nil {
				return Names{}, fmt.Errorf("stack: create queue %s: %w", name, err)
			}
			ev.refs[id] = q.url
			ev.attrs[id] = map[string]string{"Arn": q.arn, "QueueUrl": q.url, "QueueName": q.name}
			progress(verb(created) + " queue " + q.name)
		}
	}

	return Names{
		TasksTable:         ev.refs["TasksTable"],
		ReviewTable:        ev.refs["ReviewTable"],
		WatchTable:         ev.refs["WatchTable"],
		ConnectionsTable:   ev.refs["ConnectionsTable"],
		TaskQueueURL:       ev.refs["TaskQueue"],
		TaskQueueARN:       ev.attrs["TaskQueue"]["Arn"],
		DeadLetterQueueURL: ev.refs["TaskDeadLetterQueue"],
		DeadLetterQueueARN: ev.attrs["TaskDeadLetterQueue"]["Arn"],
	}, nil
}

func verb(created bool) string {
	if created {
		return "created"
	}
	return "reused"
}

// Delete deletes the tables and queues named in n; ones already gone are not
// an error. It does not wait for DynamoDB to finish deleting.
func (t *Template) Delete(ctx context.Context, ddb *dynamodb.Client, sq *sqs.Client, n Names) error {
	var errs []error
	for _, name := range []string{n.TasksTable, n.ReviewTable, n.WatchTable, n.ConnectionsTable} {
		if name == "" {
			continue
		}
		_, err := ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		if err != nil && !hasCode(err, "ResourceNotFoundException") {
			errs = append(errs, fmt.Errorf("delete table %s: %w", name, err))
		}
	}
	for _, url := range []string{n.TaskQueueURL, n.DeadLetterQueueURL} {
		if url == "" {
			continue
		}
		_, err := sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		if err != nil && !isQueueMissing(err) {
			errs = append(errs, fmt.Errorf("delete queue %s: %w", url, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// creationOrder returns the tables and queues, each after the ones it refers
// to (Ref, Fn::GetAtt, Fn::Sub, DependsOn); ties in logical id order.
func (t *Template) creationOrder() ([]string, error) {
	var ids []string
	for id, r := range t.resources {
		if r.Type == typeTable || r.Type == typeQueue {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	deps := map[string]map[string]bool{}
	for _, id := range ids {
		deps[id] = map[string]bool{}
		add := func(ref string) {
			if ref != id && (t.resources[ref].Type == typeTable || t.resources[ref].Type == typeQueue) {
				deps[id][ref] = true
			}
		}
		references(t.resources[id].Properties, add)
		for _, d := range t.resources[id].DependsOn {
			add(d)
		}
	}

	var order []string
	done := map[string]bool{}
	for len(order) < len(ids) {
		progressed := false
		for _, id := range ids {
			if done[id] {
				continue
			}
			ready := true
			for d := range deps[id] {
				ready = ready && done[d]
			}
			if ready {
				order = append(order, id)
				done[id] = true
				progressed = true
			}
		}
		if !progressed {
			return nil, errors.New("circular references between tables/queues")
		}
	}
	return order, nil
}

// ---------------------------------------------------------------------------
// DynamoDB
// ---------------------------------------------------------------------------

// Table properties applied locally, and the ones skipped on purpose.
var (
	tableApplied = []string{"AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes",
		"LocalSecondaryIndexes", "BillingMode", "ProvisionedThroughput", "StreamSpecification",
		"TimeToLiveSpecification", "TableClass", "TableName"} // TableName: replaced by prefix-LogicalId
	tableSkipped = []string{"PointInTimeRecoverySpecification", "SSESpecification",
		"DeletionProtectionEnabled", "ContributorInsightsSpecification", "Tags"}
)

type ttlSpec struct {
	attribute string
	enabled   bool
}

func createTable(ctx context.Context, ddb *dynamodb.Client, name, id string, props map[string]any) (*ddbtypes.TableDescription, bool, error) {
	in, ttl, err := tableInput(name, id, props)
	if err != nil {
		return nil, false, err
	}

	created := true
	co, err := ddb.CreateTable(ctx, in)
	if err != nil {
		if !hasCode(err, "ResourceInUseException") {
			return nil, false, err
		}
		created = false
	}

	// A table created ACTIVE (the emulators create at once) needs no
	// wait, and one created just now has TTL off: the two reads are left
	// out, two of the five requests a test's table costs.
	var table *ddbtypes.TableDescription
	if created && co.TableDescription != nil && co.TableDescription.TableStatus == ddbtypes.TableStatusActive {
		table = co.TableDescription
	} else {
		w := dynamodb.NewTableExistsWaiter(ddb, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay = 500 * time.Millisecond
			o.MaxDelay = 5 * time.Second
		})
		out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, tableActiveTimeout)
		if err != nil {
			return nil, false, fmt.Errorf("wait for ACTIVE: %w", err)
		}
		table = out.Table
	}
	if !created {
		if err := sameSchema(in, table); err != nil {
			return nil, false, fmt.Errorf("existing table differs from the template (drop it or use another prefix): %w", err)
		}
	}
	if err := ensureTTL(ctx, ddb, name, ttl, created); err != nil {
		return nil, false, err
	}
	return table, created, nil
}

func tableInput(name, id string, p map[string]any) (*dynamodb.CreateTableInput, *ttlSpec, error) {
	if err := checkKeys(p, id, tableApplied, tableSkipped); err != nil {
		return nil, nil, err
	}
	in := &dynamodb.CreateTableInput{TableName: aws.String(name)}

	defs, err := list(p["AttributeDefinitions"], id+".AttributeDefinitions")
	if err != nil {
		return nil, nil, err
	}
	for i, d := range defs {
		o, err := object(d, fmt.Sprintf("%s.AttributeDefinitions[%d]", id, i), "AttributeName", "AttributeType")
		if err != nil {
			return nil, nil, err
		}
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(scalarString(o["AttributeName"])),
			AttributeType: ddbtypes.ScalarAttributeType(scalarString(o["AttributeType"])),
		})
	}
	if in.KeySchema, err = keySchema(p["KeySchema"], id+".KeySchema"); err != nil {
		return nil, nil, err
	}
	if bm, ok := p["BillingMode"]; ok {
		in.BillingMode = ddbtypes.BillingMode(scalarString(bm))
	}
	if in.ProvisionedThroughput, err = throughput(p["ProvisionedThroughput"], id+".ProvisionedThroughput"); err != nil {
		return nil, nil, err
	}
	if tc, ok := p["TableClass"]; ok {
		in.TableClass = ddbtypes.TableClass(scalarString(tc))
	}
	if ss, ok := p["StreamSpecification"]; ok {
		o, err := object(ss, id+".StreamSpecification", "StreamViewType")
		if err != nil {
			return nil, nil, err
		}
		in.StreamSpecification = &ddbtypes.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewType(scalarString(o["StreamViewType"])),
		}
	}

	if g, ok := p["GlobalSecondaryIndexes"]; ok {
		items, err := list(g, id+".GlobalSecondaryIndexes")
		if err != nil {
			return nil, nil, err
		}
		for i, item := range items {
			where := fmt.Sprintf("%s.GlobalSecondaryIndexes[%d]", id, i)
			o, err := object(item, where, "IndexName", "KeySchema", "Projection", "ProvisionedThroughput")
			if err != nil {
				return nil, nil, err
			}
			gsi := ddbtypes.GlobalSecondaryIndex{IndexName: aws.String(scalarString(o["IndexName"]))}
			if gsi.KeySchema, err = keySchema(o["KeySchema"], where+".KeySchema"); err != nil {
				return nil, nil, err
			}
			if gsi.Projection, err = projection(o["Projection"], where+".Projection"); err != nil {
				return nil, nil, err
			}
			if gsi.ProvisionedThroughput, err = throughput(o["ProvisionedThroughput"], where+".ProvisionedThroughput"); err != nil {
				return nil, nil, err
			}
			in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
		}
	}
	if l, ok := p["LocalSecondaryIndexes"]; ok {
		items, err := list(l, id+".LocalSecondaryIndexes")
		if err != nil {
			return nil, nil, err
		}
		for i, item := range items {
			where := fmt.Sprintf("%s.LocalSecondaryIndexes[%d]", id, i)
			o, err := object(item, where, "IndexName", "KeySchema", "Projection")
			if err != nil {
				return nil, nil, err
			}
			lsi := ddbtypes.LocalSecondaryIndex{IndexName: aws.String(scalarString(o["IndexName"]))}
			if lsi.KeySchema, err = keySchema(o["KeySchema"], where+".KeySchema"); err != nil {
				return nil, nil, err
			}
			if lsi.Projection, err = projection(o["Projection"], where+".Projection"); err != nil {
				return nil, nil, err
			}
			in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, lsi)
		}
	}

	var ttl *ttlSpec
	if v, ok := p["TimeToLiveSpecification"]; ok {
		o, err := object(v, id+".TimeToLiveSpecification", "AttributeName", "Enabled")
		if err != nil {
			return nil, nil, err
		}
		ttl = &ttlSpec{attribute: scalarString(o["AttributeName"]), enabled: scalarString(o["Enabled"]) == "true"}
	}
	return in, ttl, nil
}

func keySchema(v any, where string) ([]ddbtypes.KeySchemaElement, error) {
	items, err := list(v, where)
	if err != nil {
		return nil, err
	}
	var out []ddbtypes.KeySchemaElement
	for i, item := range items {
		o, err := object(item, fmt.Sprintf("%s[%d]", where, i), "AttributeName", "KeyType")
		if err != nil {
			return nil, err
		}
		out = append(out, ddbtypes.KeySchemaElement{
			AttributeName: aws.String(scalarString(o["AttributeName"])),
			KeyType:       ddbtypes.KeyType(scalarString(o["KeyType"])),
		})
	}
	return out, nil
}

func projection(v any, where string) (*ddbtypes.Projection, error) {
	o, err := object(v, where, "ProjectionType", "NonKeyAttributes")
	if err != nil {
		return nil, err
	}
	p := &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(scalarString(o["ProjectionType"]))}
	if nk, ok := o["NonKeyAttributes"]; ok {
		attrs, err := list(nk, where+".NonKeyAttributes")
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			p.NonKeyAttributes = append(p.NonKeyAttributes, scalarString(a))
		}
	}
	return p, nil
}

func throughput(v any, where string) (*ddbtypes.ProvisionedThroughput, error) {
	if v == nil {
		return nil, nil
	}
	o, err := object(v, where, "ReadCapacityUnits", "WriteCapacityUnits")
	if err != nil {
		return nil, err
	}
	r, ok1 := toInt(o["ReadCapacityUnits"])
	w, ok2 := toInt(o["WriteCapacityUnits"])
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%s: capacity units must be numbers", where)
	}
	return &ddbtypes.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(int64(r)), WriteCapacityUnits: aws.Int64(int64(w))}, nil
}

// sameSchema reports how an existing table differs from the one the
// template describes: key schema and secondary indexes (name, keys,
// projection).
func sameSchema(want *dynamodb.CreateTableInput, got *ddbtypes.TableDescription) error {
	if a, b := keyString(want.KeySchema), keyString(got.KeySchema); a != b {
		return fmt.Errorf("key schema: template %s, table %s", a, b)
	}
	wantIdx, gotIdx := map[string]string{}, map[string]string{}
	for _, g := range want.GlobalSecondaryIndexes {
		wantIdx["GSI "+aws.ToString(g.IndexName)] = keyString(g.KeySchema) + " " + projString(g.Projection)
	}
	for _, g := range got.GlobalSecondaryIndexes {
		gotIdx["GSI "+aws.ToString(g.IndexName)] = keyString(g.KeySchema) + " " + projString(g.Projection)
	}
	for _, l := range want.LocalSecondaryIndexes {
		wantIdx["LSI "+aws.ToString(l.IndexName)] = keyString(l.KeySchema) + " " + projString(l.Projection)
	}
	for _, l := range got.LocalSecondaryIndexes {
		gotIdx["LSI "+aws.ToString(l.IndexName)] = keyString(l.KeySchema) + " " + projString(l.Projection)
	}
	for _, name := range slices.Sorted(maps.Keys(wantIdx)) {
		if g, ok := gotIdx[name]; !ok {
			return fmt.Errorf("%s missing", name)
		} else if g != wantIdx[name] {
			return fmt.Errorf("%s: template %s, table %s", name, wantIdx[name], g)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(gotIdx)) {
		if _, ok := wantIdx[name]; !ok {
			return fmt.Errorf("%s not in the template", name)
		}
	}
	return nil
}

func keyString(ks []ddbtypes.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func projString(p *ddbtypes.Projection) string {
	if p == nil {
		return "<none>"
	}
	s := string(p.ProjectionType)
	if len(p.NonKeyAttributes) > 0 {
		s += fmt.Sprint(slices.Sorted(slices.Values(p.NonKeyAttributes)))
	}
	return s
}

// ensureTTL enables TTL on the template's attribute unless it already is
// (UpdateTimeToLive fails on real DynamoDB when TTL is already enabled);
// a table created just now (fresh) has it off.
func ensureTTL(ctx context.Context, ddb *dynamodb.Client, table string, ttl *ttlSpec, fresh bool) error {
	if ttl == nil || !ttl.enabled {
		return nil
	}
	var desc *ddbtypes.TimeToLiveDescription
	if !fresh {
		d, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("describe TTL: %w", err)
		}
		desc = d.TimeToLiveDescription
	}
	if desc != nil {
		switch desc.TimeToLiveStatus {
		case ddbtypes.TimeToLiveStatusEnabled, ddbtypes.TimeToLiveStatusEnabling:
			if got := aws.ToString(desc.AttributeName); got != ttl.attribute {
				return fmt.Errorf("TTL is enabled on %q, template says %q", got, ttl.attribute)
			}
			return nil
		}
	}
	_, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{
			AttributeName: aws.String(ttl.attribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", ttl.attribute, err)
	}
	return nil
}

// ---------------------------------------------------------------------------
// SQS
// ---------------------------------------------------------------------------

// Queue properties applied locally (each becomes the queue attribute of the
// same name), and the ones skipped on purpose.
var (
	queueApplied = []string{"VisibilityTimeout", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
		"DelaySeconds", "MaximumMessageSize", "RedrivePolicy", "RedriveAllowPolicy", "FifoQueue",
		"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
		"QueueName"} // QueueName: replaced by prefix-LogicalId
	queueSkipped = []string{"SqsManagedSseEnabled", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "Tags"}
)

type queue struct{ name, url, arn string }

func createQueue(ctx context.Context, sq *sqs.Client, name, id string, props map[string]any) (queue, bool, error) {
	if err := checkKeys(props, id, queueApplied, queueSkipped); err != nil {
		return queue{}, false, err
	}
	attrs := map[string]string{}
	for k, v := range props {
		if k == "QueueName" || slices.Contains(queueSkipped, k) {
			continue
		}
		switch k {
		case "RedrivePolicy", "RedriveAllowPolicy":
			if s, ok := v.(string); ok { // already JSON
				attrs[k] = s
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return queue{}, false, fmt.Errorf("%s.%s: %w", id, k, err)
			}
			attrs[k] = string(b)
		default:
			attrs[k] = scalarString(v)
		}
	}
	if attrs["FifoQueue"] == "true" {
		name += ".fifo"
	}

	q := queue{name: name}
	created := false
	got, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	switch {
	case err == nil:
		q.url = aws.ToString(got.QueueUrl)
	case isQueueMissing(err):
		out, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		switch {
		case err == nil:
			q.url, created = aws.ToString(out.QueueUrl), true
		case hasCode(err, "QueueAlreadyExists", "QueueNameExists"):
			// Created concurrently with other attributes: reuse and converge.
			got, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
			if err != nil {
				return queue{}, false, err
			}
			q.url = aws.ToString(got.QueueUrl)
		default:
			return queue{}, false, err
		}
	default:
		return queue{}, false, err
	}

	// Converge: the template's attributes must be what the queue has, whether
	// it was just created or reused. A second mismatch means the endpoint
	// ignores the attribute, which is reported rather than papered over.
	delete(attrs, "FifoQueue") // fixed at creation, and in the name
	for round := 0; ; round++ {
		have, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(q.url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			return queue{}, false, fmt.Errorf("get attributes: %w", err)
		}
		q.arn = have.Attributes["QueueArn"]
		diff := map[string]string{}
		for k, want := range attrs {
			if !sameAttribute(k, want, have.Attributes[k]) {
				diff[k] = want
			}
		}
		if len(diff) == 0 {
			break
		}
		if round > 0 {
			var bad []string
			for _, k := range slices.Sorted(maps.Keys(diff)) {
				bad = append(bad, fmt.Sprintf("%s=%q (endpoint has %q)", k, diff[k], have.Attributes[k]))
			}
			return queue{}, false, fmt.Errorf("endpoint did not apply %s", strings.Join(bad, ", "))
		}
		if _, err := sq.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(q.url), Attributes: diff}); err != nil {
			return queue{}, false, fmt.Errorf("set attributes: %w", err)
		}
	}
	if q.arn == "" {
		return queue{}, false, errors.New("endpoint returned no QueueArn")
	}
	return q, created, nil
}

// sameAttribute compares queue attribute values; JSON policies are compared
// as JSON, with numbers and numeric strings equal ("10" == 10).
func sameAttribute(name, want, have string) bool {
	if want == have {
		return true
	}
	if name != "RedrivePolicy" && name != "RedriveAllowPolicy" {
		return false
	}
	var a, b map[string]any
	if json.Unmarshal([]byte(want), &a) != nil || json.Unmarshal([]byte(have), &b) != nil || len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || fmt.Sprint(av) != fmt.Sprint(bv) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

// checkKeys fails on a property that is neither applied nor skipped.
func checkKeys(m map[string]any, where string, applied, skipped []string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(applied, k) && !slices.Contains(skipped, k) {
			return fmt.Errorf("%s: property %s is not supported by internal/stack (add it there, or to its skip list with a reason)", where, k)
		}
	}
	return nil
}

func list(v any, where string) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list, got %T", where, v)
	}
	return l, nil
}

// object returns v as a map, failing on keys outside allowed.
func object(v any, where string, allowed ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a mapping, got %T", where, v)
	}
	if err := checkKeys(m, where, allowed, nil); err != nil {
		return nil, err
	}
	return m, nil
}

func hasCode(err error, codes ...string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && slices.Contains(codes, ae.ErrorCode())
}

// isQueueMissing recognises a missing queue in the shapes real SQS (JSON
// protocol, query-compatible code), moto and kumo return.
func isQueueMissing(err error) bool {
	var qdne *sqstypes.QueueDoesNotExist
	return errors.As(err, &qdne) || hasCode(err, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
}
