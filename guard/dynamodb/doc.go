// Package dynamodb is a fencing guard for Amazon DynamoDB (AWS SDK for Go
// v2): it enforces fence's fencing tokens inside the user's own tables,
// atomically with the user's own writes, so that fencing protects data that
// never passes through fence's storage.
//
// A Guard keeps, per resource, a fence item in a table the user names
// (Guard.Table): partition key KeyAttribute (default "pk") = KeyPrefix
// (default "fence#") + resource, and the number attribute FenceAttribute
// (default "fence") holding the resource's last fence. Guard.Write sends
// the user's items in one TransactWriteItems together with an update of the
// fence item, its last action:
//
//	ConditionExpression: attribute_not_exists(fence) OR fence <= :token
//	UpdateExpression:    SET fence = :token
//
// The guarantee: the items and the fence check commit in one DynamoDB
// transaction, which is serializable: a Write with token t for a resource
// is applied iff t >= the resource's last fence when the transaction
// commits (a resource never fenced has last fence 0); then the fence
// becomes t, all or nothing. Equal tokens are accepted, so a holder can
// retry. A lower token returns *fence.FencedError (errors.Is(err,
// fence.ErrFenced)) and changes nothing. Only a cancellation whose reason
// at the fence item's index is ConditionalCheckFailed is that refusal; its
// LastFence is the fence item's old image, which the transaction returns
// (ReturnValuesOnConditionCheckFailure ALL_OLD), or, from a server that
// does not return it, a strongly consistent GetItem. A user item's own
// failed condition, a TransactionConflict, throttling, or an error after
// the request may have been sent (a deadline, a lost connection) is
// returned wrapped as it is, never as ErrFenced; after the last kind the
// write may or may not have been applied. Claim raises a fence alone (one
// conditional UpdateItem); Fence reads it (a strongly consistent GetItem).
// Tokens are sent and read as decimal strings, exact up to fence.MaxToken
// (2^63-1): DynamoDB numbers have 38 digits of precision.
//
// Cost: one TransactWriteItems round trip per Write (the SDK's retries of
// it carry the same ClientRequestToken, so a retry of a committed
// transaction does not apply it twice). DynamoDB charges a transactional
// write twice the write capacity of a plain one, for each item, the fence
// item included: a guarded write of one item costs 4 write units (of up to
// 1 KB each), where a PutItem costs 1.
//
// Limits are DynamoDB's: 100 actions in a transaction, the fence item's
// included (MaxItems user items, checked before sending); 4 MB for the
// whole transaction; 400 KB for an item; one action per item in a
// transaction, so the items must not touch a fence item (checked: an item
// of Table whose KeyAttribute begins with KeyPrefix is refused with
// fence.ErrBadRequest). A transaction fences one resource. A table with a
// sort key: set SortKeyAttribute.
//
// What it is not: it issues no tokens (the lock service does) and checks
// only token >= last fence. Writes made without the guard (a PutItem to the
// same items) are not fenced. Global tables replicate between regions
// last-writer-wins, outside transactions, which defeats conditions: a write
// in another region can overwrite a fenced write or a fence item, so a
// fence is only as good as one region's transactions: fence through one
// region only. It does not log: it returns errors, and counts and logs
// refusals in Rejections if set.
//
// The tests run against DynamoDB Local (Amazon's local implementation of the
// DynamoDB API, version 3.3.1, in memory), which the tests start on
// loopback. Where it differs from the service, as far as the tests found:
// it accepts any signature and credentials (an access key of letters and
// digits), keeping tables per access key and region; it has no capacity and
// never throttles; it runs transactions one at a time, so that racing
// writers on one fence item never see TransactionConflict (the service
// cancels one of them with that reason, which Write returns as an error,
// not a refusal: retry it); it returns the old image on a failed condition
// (ReturnValuesOnConditionCheckFailure), enforces the 100-action, 4 MB and
// 400 KB limits, the one-action-per-item rule and ClientRequestToken
// idempotency as the service does, and normalizes numbers as the service
// does ("1E+2" reads back "100"). Global tables, and their last-writer-wins
// replication, are not there to test.
package dynamodb
