package payload

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxItemBytes is DynamoDB's item size limit: 400 KB (409,600 bytes),
// counting attribute names and values.
const MaxItemBytes = 400 * 1024

// DefaultItemBudget is the size PlanOffload keeps a new or rewritten item
// under: the limit less 50 KiB of headroom for what the item gains later
// (attempts, receipts, a result reference, review notes), so an update can
// never be the write that crosses 400 KB.
const DefaultItemBudget = MaxItemBytes - 50<<10

// ErrItemTooLarge: even with every candidate offloaded the item is over the
// budget. Steer it PermanentInput: no retry makes it fit.
var ErrItemTooLarge = errors.New("payload: item too large even with its payloads offloaded")

// SizeFunc returns an item's size in bytes by DynamoDB's sizing rules (the
// ledger's item-size function).
type SizeFunc func(item map[string]types.AttributeValue) int

// worstRef is the largest reference the Store writes, standing in for an
// offloaded attribute when sizing the item.
var worstRef = Ref{
	Bucket: strings.Repeat("b", 63),
	Key:    "results/" + strings.Repeat("t", 128) + "/9223372036854775807/9223372036854775807",
	SHA256: strings.Repeat("0", 64),
	Size:   math.MaxInt64,
}

// Offload is PlanOffload's answer.
type Offload struct {
	// Names are the candidate attributes to move to S3, in the order
	// chosen.
	Names []string
	// Size is the item's size with those attributes replaced by references
	// (worst case).
	Size int
}

// PlanOffload decides which payload attributes of item go to S3. A
// candidate whose own size (name and value, by size) is over inlineLimit
// always goes, so the hot item stays small; then, while the item with
// references in their place is over budget, the largest remaining
// candidate goes too. Candidates absent from item are ignored. budget ≤ 0
// means DefaultItemBudget; inlineLimit < 0 offloads every candidate.
// Errors: ErrItemTooLarge when the attributes that must stay are over
// budget by themselves.
func PlanOffload(item map[string]types.AttributeValue, candidates []string, inlineLimit int, size SizeFunc, budget int) (Offload, error) {
	if budget <= 0 {
		budget = DefaultItemBudget
	}
	type cand struct {
		name string
		size int
	}
	var rest []cand
	var plan Offload
	work := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		work[k] = v
	}
	seen := map[string]bool{}
	for _, name := range candidates {
		av, ok := item[name]
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		n := size(map[string]types.AttributeValue{name: av})
		if inlineLimit < 0 || n > inlineLimit {
			plan.Names = append(plan.Names, name)
			work[name] = worstRef.Attribute()
			continue
		}
		rest = append(rest, cand{name, n})
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].size > rest[j].size })
	plan.Size = size(work)
	for _, c := range rest {
		if plan.Size <= budget {
			break
		}
		plan.Names = append(plan.Names, c.name)
		work[c.name] = worstRef.Attribute()
		plan.Size = size(work)
	}
	if plan.Size > budget {
		return plan, fmt.Errorf("%w: %d bytes, budget %d", ErrItemTooLarge, plan.Size, budget)
	}
	return plan, nil
}
