// Package templatetest checks template.yaml against the code it deploys.
//
// It has no exported API: everything is in its tests. They load the template
// with internal/stack and compare each function's environment variables and
// IAM permissions with what that function's code does, found statically:
//
//  1. `go list -deps -export -json ./functions/<name>` (with the deployed
//     build tag lambda.norpc) names the module packages the function links
//     and the compiler's export data for everything else;
//  2. those module packages are parsed (non-test files only) and type-checked
//     with go/types, importing dependencies from the export data;
//  3. a call graph is built from the syntax: a function calls every function
//     or method it names (a call or a method value such as h.Handle), and
//     naming an interface method reaches every module method of that name.
//     Walking it from the function's main (and every package's init and
//     package-level variables) gives the code the function can run — so the
//     submit function is not charged with the reconciler's queries just
//     because both link pkg/ledger;
//  4. in that code:
//     - an AWS operation is a call whose second parameter is a pointer to an
//     <Op>Input type of an aws-sdk-go-v2 service package, made through a
//     method named <Op> (or New<Op>Paginator). It needs the IAM action
//     <service>:<Op>; Bedrock's Converse needs bedrock:InvokeModel.
//     TransactWriteItems has no IAM action of its own: each item literal
//     needs its own (Put → PutItem, Update → UpdateItem, ConditionCheck →
//     ConditionCheckItem, Delete → DeleteItem, Get → GetItem);
//     - a query's index is the constant IndexName of a QueryInput literal;
//     - an environment read is a call of os.Getenv or os.LookupEnv, or of any
//     function-typed variable, parameter or field with the shape of
//     os.Getenv (the mains and internal/provider pass getenv around). Its
//     argument is a string constant, a range variable over a literal list
//     of constants (the mains' "required" loops), or a parameter of an
//     enclosing function literal (a wrapper such as provider's get, whose
//     own calls are the reads); anything else is reported as a dynamic read
//     and must be listed, with the reason, in the test.
//
// What the analysis does not see: code reached only through library
// callbacks (fmt calling String, encoding/json calling MarshalJSON) and
// variables read by libraries (the Lambda runtime's AWS_LAMBDA_*, the SDK's
// AWS_*). Neither reads taskledger configuration or calls AWS on its own.
//
// The template side reads each function's own execution role (its Role:
// !GetAtt <AWS::IAM::Role>.Arn) and that role's inline Policies; no AWS
// managed policy is allowed, so the statements there are everything the
// function may do. A function whose code reads a secret may also hold
// kms:Decrypt on SecretsKmsKeyArn, only with kms:ViaService Secrets Manager
// (the service decrypts on its behalf). Besides the code's calls, a role must grant what the
// Lambda service does with it — logs:CreateLogStream/PutLogEvents on the
// function's own log group and, for an SQS event source,
// sqs:ReceiveMessage/DeleteMessage/GetQueueAttributes on that queue — and
// nothing more. It counts both branches of every Fn::If in a policy: each
// condition depends on a parameter, so each branch is live in some
// deployment.
//
// secure_test.go evaluates the template per AuthMode (stack.Values): a
// default deploy fails its Rules with a message naming what to set; every
// task route requires the mode's authorizer and only the page and
// /auth/config are public; throttling has defaults and CORS is off; the
// submit function's auth settings match the authorizer; Cognito admits
// only administrator-created users through a public code+PKCE client; the
// task id key secret is read by the submit function alone; and SAM's
// translator keeps the Rules and adds no unprotected API.
//
// dashboard_test.go parses the CloudWatch dashboard's body (JSON, its Fn::Sub
// variables naming real resources) and checks that every taskledger metric
// it or an alarm names is one the code emits with those dimensions (a
// static scan of the Record/Set/Add calls), except QuotaExceeded and
// BudgetExhausted, the spend metrics of spend control (DESIGN §13), read only through
// dimension-free Metrics Insights queries.
package templatetest
