internal import CCBOR

/// Decodes CBOR with libcbor's streaming decoder into a ``CBOR`` tree.
///
/// This file and `CBOREncoder.swift` are the only code that touches libcbor.
/// libcbor reads one item head at a time (`cbor_stream_decode`) and calls back
/// with its value; string payloads are copied out at once, so no libcbor
/// memory outlives a call. Each head is checked before anything is allocated:
/// an array or map may not declare more members than bytes remain, nesting and
/// item count are bounded, and indefinite lengths, tags and duplicate map keys
/// are rejected (CTAP2 canonical CBOR forbids the first two).
package enum CBORDecoder {
    /// Decodes exactly one data item that spans all of `bytes`.
    package static func decode(_ bytes: [UInt8], limits: CBORLimits = CBORLimits()) throws(WebAuthnError) -> CBOR {
        let (value, used) = try decodePrefix(bytes, from: 0, limits: limits)
        guard used == bytes.count else {
            throw WebAuthnError(.cborMalformed, "\(bytes.count - used) trailing bytes after the CBOR item")
        }
        return value
    }

    /// Decodes the one data item that starts at `offset`; returns it and the
    /// number of bytes it occupies.
    package static func decodePrefix(
        _ bytes: [UInt8], from offset: Int, limits: CBORLimits = CBORLimits()
    ) throws(WebAuthnError) -> (CBOR, Int) {
        guard offset >= 0, offset < bytes.count else { throw WebAuthnError(.cborMalformed, "empty CBOR input") }
        guard bytes.count - offset <= limits.maxBytes else {
            throw WebAuthnError(.inputTooLarge, "CBOR input is \(bytes.count - offset) bytes; the limit is \(limits.maxBytes)")
        }
        let builder = CBORBuilder(limits: limits)
        let context = Unmanaged.passUnretained(builder).toOpaque()
        var position = offset
        try bytes.withUnsafeBufferPointer { (buffer) throws(WebAuthnError) in
            // Not empty (checked above), so the buffer has a base address.
            guard let base = buffer.baseAddress else { throw WebAuthnError(.cborMalformed, "empty CBOR input") }
            withUnsafePointer(to: cborCallbacks) { callbacks in
                while builder.result == nil && builder.error == nil {
                    builder.remaining = buffer.count - position
                    let r = cbor_stream_decode(base + position, buffer.count - position, callbacks, context)
                    switch r.status {
                    case CBOR_DECODER_FINISHED:
                        position += r.read
                    case CBOR_DECODER_NEDATA:
                        builder.error = WebAuthnError(.cborMalformed, "CBOR is truncated at byte \(position - offset)")
                    default:
                        builder.error = WebAuthnError(.cborMalformed, "CBOR is malformed at byte \(position - offset)")
                    }
                }
            }
            if let error = builder.error { throw error }
        }
        // The loop ends with a result or an error.
        guard let result = builder.result else { throw WebAuthnError(.cborMalformed, "CBOR ended without a complete item") }
        return (result, position - offset)
    }
}

/// Accumulates streamed items into a tree, enforcing the limits.
private final class CBORBuilder {
    /// An open array or map. A class, so that appending mutates its items in
    /// place: an enum payload taken out of the stack and put back would copy
    /// the whole array at every append (quadratic in the container's size).
    package final class Container {
        let isMap: Bool
        /// Members still expected: items of an array, keys plus values of a map.
        let expected: Int
        /// The members so far; a map's keys and values alternate.
        var items: [CBOR] = []

        package init(isMap: Bool, expected: Int) {
            self.isMap = isMap
            self.expected = expected
        }
    }

    package let limits: CBORLimits
    package var stack: [Container] = []
    package var result: CBOR?
    package var error: WebAuthnError?
    package var items = 0
    /// Bytes left in the input from the head being decoded.
    package var remaining = 0

    package init(limits: CBORLimits) { self.limits = limits }

    package func fail(_ code: WebAuthnError.Code, _ message: String) {
        if error == nil { error = WebAuthnError(code, message) }
    }

    package func countItem() -> Bool {
        items += 1
        if items > limits.maxItems {
            fail(.cborLimitExceeded, "CBOR has more than \(limits.maxItems) items")
            return false
        }
        return true
    }

    package func emit(_ value: CBOR) {
        guard error == nil, countItem() else { return }
        append(value)
    }

    private func append(_ value: CBOR) {
        guard let top = stack.last else {
            result = value
            return
        }
        top.items.append(value)
        guard top.items.count == top.expected else { return }
        stack.removeLast()
        if top.isMap {
            guard let pairs = makeMap(top.items) else { return }
            append(.map(pairs))
        } else {
            append(.array(top.items))
        }
    }

    /// Pairs the keys and values of a map, refusing duplicate keys: a scan for
    /// up to 16 keys, a set beyond, so the check stays linear. A key that is or holds a NaN is
    /// refused too (NaN equals nothing, so it would escape the check). Text keys compare by
    /// Unicode canonical equivalence (Swift's `==`), so `"é"` and `"e\u{301}"` count as one key:
    /// stricter than CBOR, which would take both.
    private func makeMap(_ members: [CBOR]) -> [CBORPair]? {
        let keys = stride(from: 0, to: members.count, by: 2).map { members[$0] }
        // At any depth: a NaN inside an array key let two identical keys through (red team,
        // round 25: `[NaN]` twice).
        for key in keys where key.holdsNaN {
            fail(.cborMalformed, "CBOR map key is or holds NaN")
            return nil
        }
        if keys.count <= 16 {
            for i in 0..<keys.count {
                for j in (i + 1)..<max(i + 1, keys.count) where keys[i] == keys[j] {
                    fail(.cborMalformed, "CBOR map has a duplicate key")
                    return nil
                }
            }
        } else if Set(keys).count != keys.count {
            fail(.cborMalformed, "CBOR map has a duplicate key")
            return nil
        }
        return stride(from: 0, to: members.count, by: 2).map { CBORPair(members[$0], members[$0 + 1]) }
    }

    package func startArray(_ size: Int) {
        guard error == nil, countItem() else { return }
        // Every member takes at least one byte: a larger claim is a lie that
        // would otherwise make us reserve memory for nothing.
        // libcbor passes a 64-bit length as size_t, which Swift sees as Int: a
        // length of 2^63 or more arrives negative.
        guard size >= 0, size <= remaining else { return fail(.cborMalformed, "CBOR array declares more items than the input has bytes") }
        guard stack.count < limits.maxDepth else { return fail(.cborLimitExceeded, "CBOR nesting deeper than \(limits.maxDepth)") }
        if size == 0 { append(.array([])); return }
        stack.append(Container(isMap: false, expected: size))
    }

    package func startMap(_ size: Int) {
        guard error == nil, countItem() else { return }
        guard size >= 0, size <= remaining / 2 else { return fail(.cborMalformed, "CBOR map declares more pairs than the input has bytes") }
        guard stack.count < limits.maxDepth else { return fail(.cborLimitExceeded, "CBOR nesting deeper than \(limits.maxDepth)") }
        if size == 0 { append(.map([])); return }
        stack.append(Container(isMap: true, expected: 2 * size))  // size <= remaining / 2: no overflow
    }

    /// A definite byte string: libcbor has checked that its `length` bytes are in the input.
    package func bytes(_ data: UnsafePointer<UInt8>?, _ length: Int) {
        guard length >= 0, length <= remaining else { return fail(.cborMalformed, "CBOR byte string is longer than the input") }
        emit(.bytes(Array(UnsafeBufferPointer(start: data, count: length))))
    }

    package func text(_ data: UnsafePointer<UInt8>?, _ length: Int) {
        guard length >= 0, length <= remaining else { return fail(.cborMalformed, "CBOR text string is longer than the input") }
        let buffer = UnsafeBufferPointer(start: data, count: length)
        guard let s = String(validating: buffer, as: UTF8.self) else {
            return fail(.cborMalformed, "CBOR text string is not valid UTF-8")
        }
        emit(.text(s))
    }

    /// The builder behind libcbor's context pointer, which is always the one
    /// `decodePrefix` passed (never nil).
    package static func from(_ context: UnsafeMutableRawPointer?) -> CBORBuilder {
        guard let context else { fatalError("libcbor called back without the decoder's context") }  // not input-dependent
        return Unmanaged<CBORBuilder>.fromOpaque(context).takeUnretainedValue()
    }
}

/// libcbor's callback table. C function pointers cannot capture, so each one
/// recovers the builder from the context pointer.
private let cborCallbacks: cbor_callbacks = {
    var c = cbor_empty_callbacks
    c.uint8 = { ctx, v in CBORBuilder.from(ctx).emit(.unsigned(UInt64(v))) }
    c.uint16 = { ctx, v in CBORBuilder.from(ctx).emit(.unsigned(UInt64(v))) }
    c.uint32 = { ctx, v in CBORBuilder.from(ctx).emit(.unsigned(UInt64(v))) }
    c.uint64 = { ctx, v in CBORBuilder.from(ctx).emit(.unsigned(v)) }
    c.negint8 = { ctx, v in CBORBuilder.from(ctx).emit(.negative(UInt64(v))) }
    c.negint16 = { ctx, v in CBORBuilder.from(ctx).emit(.negative(UInt64(v))) }
    c.negint32 = { ctx, v in CBORBuilder.from(ctx).emit(.negative(UInt64(v))) }
    c.negint64 = { ctx, v in CBORBuilder.from(ctx).emit(.negative(v)) }
    // libcbor 0.8's header labels these two pairs the other way round; the
    // (data, length) callbacks are the definite strings.
    c.byte_string = { ctx, data, length in CBORBuilder.from(ctx).bytes(data, length) }
    c.string = { ctx, data, length in CBORBuilder.from(ctx).text(data, length) }
    c.byte_string_start = { ctx in CBORBuilder.from(ctx).fail(.cborMalformed, "indefinite-length byte string") }
    c.string_start = { ctx in CBORBuilder.from(ctx).fail(.cborMalformed, "indefinite-length text string") }
    c.array_start = { ctx, size in CBORBuilder.from(ctx).startArray(size) }
    c.map_start = { ctx, size in CBORBuilder.from(ctx).startMap(size) }
    c.indef_array_start = { ctx in CBORBuilder.from(ctx).fail(.cborMalformed, "indefinite-length array") }
    c.indef_map_start = { ctx in CBORBuilder.from(ctx).fail(.cborMalformed, "indefinite-length map") }
    c.indef_break = { ctx in CBORBuilder.from(ctx).fail(.cborMalformed, "unexpected break") }
    c.tag = { ctx, _ in CBORBuilder.from(ctx).fail(.cborMalformed, "CBOR tags are not allowed") }
    c.float2 = { ctx, v in CBORBuilder.from(ctx).emit(.float(Double(v))) }
    c.float4 = { ctx, v in CBORBuilder.from(ctx).emit(.float(Double(v))) }
    c.float8 = { ctx, v in CBORBuilder.from(ctx).emit(.float(v)) }
    c.undefined = { ctx in CBORBuilder.from(ctx).emit(.undefined) }
    c.null = { ctx in CBORBuilder.from(ctx).emit(.null) }
    c.boolean = { ctx, v in CBORBuilder.from(ctx).emit(.bool(v)) }
    return c
}()
