internal import COpenSSL
internal import Foundation
package import _WebAuthnEncoding

/// Helpers shared by the OpenSSL wrappers. Rules (Docs/CInterop.md): every
/// owned C object lives in one final class whose `deinit` frees it; borrowed
/// pointers never escape the closure that borrowed them; whenever a call fails
/// the whole OpenSSL error queue is drained into the Swift error, so no stale
/// error is left for the next caller on this thread.
package enum OpenSSL {
    /// Drains the thread's error queue into one line of text.
    package static func drainErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            if messages.count < 4 { messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
        }
        return messages.isEmpty ? "no OpenSSL error detail" : messages.joined(separator: "; ")
    }

    /// Clears the queue after an expected failure (e.g. a signature that does not verify).
    package static func clearErrors() { ERR_clear_error() }

    /// The linked OpenSSL's version text, such as `OpenSSL 3.0.17 1 Jul 2025`.
    package static var versionText: String { OpenSSL_version(OPENSSL_VERSION).map { String(cString: $0) } ?? "an unknown OpenSSL" }

    package static func failure(_ what: String) -> WebAuthnError {
        WebAuthnError(.cryptoFailure, "\(what) failed: \(drainErrors())")
    }

    /// OSSL_PARAM names. An OSSL_PARAM (and OSSL_PARAM_BLD) keeps the name by
    /// pointer, so names must outlive the parameters: a Swift String passed as
    /// `const char *` is only a temporary. These live for the whole process.
    package enum ParamName {
        nonisolated(unsafe) static let group = cString(OSSL_PKEY_PARAM_GROUP_NAME)
        nonisolated(unsafe) static let publicKey = cString(OSSL_PKEY_PARAM_PUB_KEY)
        nonisolated(unsafe) static let rsaN = cString(OSSL_PKEY_PARAM_RSA_N)
        nonisolated(unsafe) static let rsaE = cString(OSSL_PKEY_PARAM_RSA_E)
        nonisolated(unsafe) static let privateKey = cString(OSSL_PKEY_PARAM_PRIV_KEY)
        /// A parameter *value*: OSSL_PARAM_BLD also keeps pushed strings by pointer until `to_param`.
        nonisolated(unsafe) static let p256 = cString("prime256v1")
        nonisolated(unsafe) static let digest = cString(OSSL_MAC_PARAM_DIGEST)
        /// A parameter value: the digest of HMAC-SHA-256.
        nonisolated(unsafe) static let sha256 = cString("SHA256")

        private static func cString(_ s: String) -> UnsafePointer<CChar> { UnsafePointer(strdup(s)!) }
    }

    /// Algorithms fetched once per process: an implicit fetch on every call
    /// (as `EVP_sha256()` does) costs as much as hashing a short message.
    nonisolated(unsafe) static let sha1: OpaquePointer = fetchDigest("SHA1")
    nonisolated(unsafe) static let sha256: OpaquePointer = fetchDigest("SHA256")
    nonisolated(unsafe) static let sha384: OpaquePointer = fetchDigest("SHA384")
    nonisolated(unsafe) static let sha512: OpaquePointer = fetchDigest("SHA512")
    nonisolated(unsafe) static let hmac: OpaquePointer = {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { fatalError("OpenSSL has no HMAC: \(drainErrors())") }
        return mac
    }()

    private static func fetchDigest(_ name: String) -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, name, nil) else {
            fatalError("OpenSSL has no \(name): \(drainErrors())")  // an installation defect, not input
        }
        return md
    }
}

/// The hash functions WebAuthn uses.
package enum DigestAlgorithm: Sendable {
    case sha1, sha256, sha384, sha512

    package var md: OpaquePointer {
        switch self {
        case .sha1: return OpenSSL.sha1
        case .sha256: return OpenSSL.sha256
        case .sha384: return OpenSSL.sha384
        case .sha512: return OpenSSL.sha512
        }
    }

    package var byteCount: Int {
        switch self {
        case .sha1: return 20
        case .sha256: return 32
        case .sha384: return 48
        case .sha512: return 64
        }
    }
}

/// One-shot and multi-part hashing through OpenSSL EVP.
package enum Digest {
    /// Hashes the concatenation of `parts`.
    package static func hash(_ algorithm: DigestAlgorithm, _ parts: [UInt8]...) -> [UInt8] {
        hash(algorithm, parts: parts)
    }

    package static func hash(_ algorithm: DigestAlgorithm, parts: [[UInt8]]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: algorithm.byteCount)
        guard let ctx = EVP_MD_CTX_new() else { fatalError("out of memory") }
        defer { EVP_MD_CTX_free(ctx) }
        var ok = EVP_DigestInit_ex2(ctx, algorithm.md, nil) == 1
        for part in parts where ok {
            ok = part.withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) } == 1
        }
        var length: UInt32 = 0
        if ok { ok = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(ctx, $0.baseAddress, &length) } == 1 }
        guard ok else { fatalError("digest failed: \(OpenSSL.drainErrors())") }  // cannot fail on valid inputs
        return out
    }

    package static func sha256(_ bytes: [UInt8]) -> [UInt8] { hash(.sha256, parts: [bytes]) }
}
