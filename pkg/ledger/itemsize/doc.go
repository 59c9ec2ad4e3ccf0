// Package itemsize computes the size DynamoDB charges an item against its
// 400 KB item limit, following "DynamoDB item sizes and formats" in the
// DynamoDB Developer Guide:
//
//   - a string is its UTF-8 bytes; a binary value its raw bytes;
//   - a number is 1 byte per two significant digits plus 1 byte (leading
//     and trailing zeroes trimmed; DynamoDB calls this approximate);
//   - null and Boolean are 1 byte;
//   - a list or map is 3 bytes of overhead plus its elements, each element
//     with 1 more byte (map elements also count their key's bytes);
//   - sets are the sum of their elements;
//   - every top-level attribute adds the UTF-8 bytes of its name.
//
// The package is pure (no AWS calls) so the ledger can check a write before
// sending it and the fault injector can enforce the limit on emulators that
// do not.
package itemsize
