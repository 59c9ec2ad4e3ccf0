// Package stack creates taskledger's local resources from template.yaml.
//
// template.yaml (AWS SAM) is the single source of truth for every resource.
// This package reads it and makes the DynamoDB tables and SQS queues it
// declares on any AWS-compatible endpoint — the embedded kumo emulator,
// moto_server, LocalStack or a real account — so local resources cannot drift
// from deployed ones. It also exposes the parts of the template the local
// runner emulates: functions (with Globals merged the way SAM merges them),
// SQS event source mappings and schedules.
//
// # Parsing
//
// Load decodes the YAML with gopkg.in/yaml.v3 and rewrites CloudFormation's
// short-form tags into their long form, so the rest of the package (and its
// callers) only ever see plain maps, lists and scalars:
//
//	!Ref X               {"Ref": "X"}
//	!GetAtt A.B          {"Fn::GetAtt": ["A", "B"]}
//	!Sub "x-${A}"        {"Fn::Sub": "x-${A}"}
//	!If [C, a, b]        {"Fn::If": ["C", a, b]}
//	!Condition C         {"Condition": "C"}
//
// and likewise for every other "!Name" → "Fn::Name". Unknown tags are an
// error, reported with their line number.
//
// # Evaluating a deployment
//
// Values evaluates the template for one set of parameter values (the
// defaults, less overrides): Conditions, the intrinsics that depend only on
// parameters, and RuleFailures — the Rules assertions CloudFormation would
// refuse the deploy with. Tests use it to check what each AuthMode deploys.
//
// # Creating resources
//
// Create makes every AWS::DynamoDB::Table and AWS::SQS::Queue, named
// prefix+"-"+LogicalId, in dependency order (a dead-letter queue before the
// queue whose RedrivePolicy points at it). Intrinsic functions in their
// properties are evaluated against parameter defaults, pseudo parameters and
// the resources already created (!GetAtt Queue.Arn is the real ARN the
// endpoint returned).
//
// Every property is either applied or deliberately skipped; an unknown one is
// an error, so nobody can add a property to the template that silently does
// nothing locally. Skipped on purpose, because they have no local meaning or
// would get in the way of tests: PointInTimeRecoverySpecification,
// SSESpecification, DeletionProtectionEnabled, ContributorInsightsSpecification
// and Tags on tables; SqsManagedSseEnabled, KmsMasterKeyId,
// KmsDataKeyReusePeriodSeconds and Tags on queues. DeletionPolicy and
// UpdateReplacePolicy are CloudFormation's business and are ignored.
//
// Create is idempotent. An existing table is reused after checking that its
// key schema and secondary indexes match the template (a mismatch is an error
// naming the difference: drop the table or use another prefix); TTL is
// enabled only if it is not already. An existing queue is reused and its
// attributes are converged with SetQueueAttributes. Tables are waited for
// until ACTIVE.
//
// CreateBuckets makes every AWS::S3::Bucket, named lower(prefix-LogicalId)
// (S3 names are lower case), and records the payload bucket in
// Names.PayloadBucket; an existing bucket of the caller's is reused.
// Applied: the name only. Skipped on purpose: BucketEncryption,
// PublicAccessBlockConfiguration, OwnershipControls, LifecycleConfiguration,
// VersioningConfiguration and Tags (an emulator neither enforces nor ages
// them), and CorsConfiguration (local uploads go through the local stack's
// same-origin proxy); the AWS::S3::BucketPolicy is not created. DeleteBuckets empties and
// deletes it.
//
// Parameters take their Default values; AWS::AccountId is "000000000000",
// AWS::StackName is the prefix, and AWS::Region is the DynamoDB client's.
package stack
