package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/api"
	"github.com/taskledger/taskledger/internal/awsclient"
	"github.com/taskledger/taskledger/internal/faultinject"
	"github.com/taskledger/taskledger/internal/spend"
	"github.com/taskledger/taskledger/internal/testenv"
)

// TestChainBudgetExtendWithALostReply: the chain budget's Extend is
// applied but its reply is lost (once; then on every try). Once: the
// regenerate is accepted and the expiry moved. Always: 503 with nothing
// recorded, and the same key is accepted afterwards.
func TestChainBudgetExtendWithALostReply(t *testing.T) {
	t.Parallel()
	testenv.Each(t, func(t *testing.T, e *testenv.Env) {
		clock := testenv.NewClock(time.Now().UTC().Truncate(time.Second))
		mode := "once"
		lost := 0
		inj := faultinject.New(faultinject.ScheduleFunc(func(c faultinject.Call) faultinject.Kind {
			if c.Service == "DynamoDB" && c.Operation == "UpdateItem" {
				if mode == "always" || (mode == "once" && lost == 0) {
					lost++
					return faultinject.LostReply
				}
			}
			return ""
		}))
		cfg := e.AWS.Copy()
		cfg.APIOptions = append(append(cfg.APIOptions[:0:0], e.AWS.APIOptions...), inj.Register)
		acct, err := spend.NewAccountant(spend.AccountantConfig{DB: awsclient.DynamoDB(cfg), TasksTable: e.Names.TasksTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		direct, err := spend.NewAccountant(spend.AccountantConfig{DB: e.DDB, TasksTable: e.Names.TasksTable, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		b := setup(t, e, withHandler(func(h *api.Handler) { h.Budgets = acct }))
		onClock(t, b, clock)
		ctx := context.Background()
		root := view(t, b.do(t, submitReq("lost-root", budgetBody("p", `{"max_total_tokens":10000}`))))
		chain := spend.ChainKeyOf(stored(t, b, root.TaskID))
		if _, err := direct.Reserve(ctx, chain, spend.Budget{MaxTokens: 10_000}, spend.Reservation{ID: root.TaskID + ".a1", Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(24 * time.Hour)
		wantStatus(t, b.do(t, regenReq(root.TaskID, "lost-regen-1", "")), http.StatusAccepted)
		if lost == 0 {
			t.Fatal("no lost reply injected")
		}
		n, _ := budgetItem(t, e, chain, clock.Now())["expires_at"].(*ddbtypes.AttributeValueMemberN)
		if want := strconv.FormatInt(clock.Now().Add(spend.DefaultRetention).Unix(), 10); n == nil || n.Value != want {
			t.Fatalf("expires_at %v, want %s", n, want)
		}

		clock.Advance(24 * time.Hour)
		mode = "always"
		before := len(scanTasks(t, e))
		resp := b.do(t, regenReq(root.TaskID, "lost-regen-2", ""))
		switch resp.StatusCode {
		case http.StatusAccepted: // the Extend was applied; its refusal on the retry is an answer
			n, _ := budgetItem(t, e, chain, clock.Now())["expires_at"].(*ddbtypes.AttributeValueMemberN)
			if want := strconv.FormatInt(clock.Now().Add(spend.DefaultRetention).Unix(), 10); n == nil || n.Value != want {
				t.Fatalf("202 but expires_at %v, want %s", n, want)
			}
			return
		case http.StatusServiceUnavailable:
			if resp.Headers["Retry-After"] == "" {
				t.Fatal("503 without Retry-After")
			}
		default:
			t.Fatalf("every Extend reply lost: %d %s", resp.StatusCode, resp.Body)
		}
		if got := len(scanTasks(t, e)); got != before {
			t.Fatalf("503 recorded a task: %d items, want %d", got, before)
		}
		mode = "off"
		wantStatus(t, b.do(t, regenReq(root.TaskID, "lost-regen-2", "")), http.StatusAccepted)
	})
}
