package emulator

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/taskledger/taskledger/internal/awsclient"
)

// BenchmarkMotoUpdateItem reports moto's own CPU per conditional
// UpdateItem (cpu-ms/op, from /proc), the cost every moto leg pays per
// ledger write.
func BenchmarkMotoUpdateItem(b *testing.B) {
	m, err := StartMoto(context.Background(), "")
	if err != nil {
		needMoto(b, err)
	}
	defer m.Stop()
	ctx := context.Background()
	cfg, err := awsclient.Load(ctx, awsclient.Options{Endpoint: m.URL, StaticCredentials: true, Region: "us-east-1", HTTPClient: awsclient.DefaultHTTPClient()})
	if err != nil {
		b.Fatal(err)
	}
	db := awsclient.DynamoDB(cfg)
	createTable(b, db, "t", false)
	key := map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "a"}}
	cpu0 := procCPU(b, m.cmd.Process.Pid)
	b.ResetTimer()
	for range b.N {
		seq++
		i := seq
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key,
			UpdateExpression:          aws.String("SET v = :v"),
			ConditionExpression:       aws.String("attribute_not_exists(v) OR v < :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(procCPU(b, m.cmd.Process.Pid)-cpu0)*10/float64(b.N), "moto-cpu-ms/op")
}

var seq int

// procCPU is the process's user+system CPU in clock ticks (1/100 s).
func procCPU(b *testing.B, pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return u + s
}
