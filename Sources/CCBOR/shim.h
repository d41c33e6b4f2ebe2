/* libcbor, the project's only CBOR implementation. Only the streaming
 * decoder and the item-head encoders are used (Sources/WebAuthnCore/CBOR). */
#include <cbor.h>
