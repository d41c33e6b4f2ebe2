internal import COpenSSL
package import Foundation
package import _WebAuthnEncoding

/// An owned, parsed X.509 certificate revocation list (OpenSSL `X509_CRL`).
package final class CertificateRevocationList: @unchecked Sendable {
    package let crl: OpaquePointer

    /// Parses a DER CRL (at most 4 MiB).
    package init(der: [UInt8]) throws(WebAuthnError) {
        guard !der.isEmpty, der.count <= 4 << 20 else {
            throw WebAuthnError(.configurationInvalid, "CRL size \(der.count) is outside 1 byte...4 MiB")
        }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509_CRL(nil, &p, buffer.count)
        }
        guard let parsed else {
            let detail = OpenSSL.drainErrors()
            throw WebAuthnError(.configurationInvalid, "not a DER CRL (\(detail))")
        }
        crl = parsed
    }

    /// Parses a DER CRL, or a PEM one (`-----BEGIN X509 CRL-----`).
    package convenience init(derOrPEM bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.drop(while: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }).starts(with: Array("-----BEGIN".utf8)) else {
            try self.init(der: bytes)
            return
        }
        guard let der = PEM.body(String(decoding: bytes, as: UTF8.self)) else {
            throw WebAuthnError(.configurationInvalid, "the PEM CRL's body is not base64")
        }
        try self.init(der: der)
    }

    deinit { X509_CRL_free(crl) }
}

/// Certificate path validation through OpenSSL's `X509_verify_cert`.
///
/// The trust anchors are exactly the given roots: a root is never taken from
/// x5c, and x5c supplies only the leaf and intermediates. The verification
/// time is the engine's clock (`X509_VERIFY_PARAM_set_time`); nothing is
/// fetched from the network; CRLs are checked when supplied; every key of the
/// path, and every signature but a root's on itself (which carries no trust),
/// has at least 112 bits of security.
package enum CertificateChain {
    /// Longest chain accepted (leaf, intermediates, root).
    package static let maxDepth = 8
    /// OpenSSL's security level for the keys and signatures of a path (2: 112 bits).
    static let securityLevel: Int32 = 2

    /// The outcome of a path validation.
    package enum Outcome: Sendable {
        /// The chain leads to one of the anchors; the validated path, leaf first, ends at the anchor.
        case trusted([X509Certificate])
        /// It does not; the code says why (`attestation_untrusted`, `certificate_expired`, `certificate_revoked`).
        case untrusted(WebAuthnError)
    }

    /// Validates `chain` (leaf first) against `anchors` at `time`; `leafRole` names the first
    /// certificate in messages.
    ///
    /// OpenSSL takes, for a certificate without an authority key identifier, the first anchor
    /// whose name is its issuer's; when several anchors share that name (a root re-keyed under
    /// its old name) and the first is not the signer, each of the others is tried in turn (one
    /// more validation for each, after a failure, when anchors share a name; re-check of round 28:
    /// a genuine chain to the second of two such roots was refused with a signature failure, and
    /// with CRLs the failure is the wrong root's CRL signature).
    package static func validate(
        _ chain: [X509Certificate], anchors: [X509Certificate], crls: [CertificateRevocationList] = [], at time: Date,
        leafRole: String = "the attestation certificate"
    ) -> Outcome {
        let outcome = validateOnce(chain, anchors: anchors, crls: crls, at: time, leafRole: leafRole)
        guard case .untrusted = outcome, anchors.count > 1 else { return outcome }
        var groups: [[X509Certificate]] = []
        for anchor in anchors {
            if let i = groups.firstIndex(where: { X509_NAME_cmp(X509_get_subject_name($0[0].x509), X509_get_subject_name(anchor.x509)) == 0 }) {
                groups[i].append(anchor)
            } else {
                groups.append([anchor])
            }
        }
        let widest = groups.map(\.count).max() ?? 1
        // A retry that reached its root and found it (or a certificate on the way) expired or
        // revoked says more than the first attempt's failure at the wrong root.
        var reached: Outcome?
        for turn in 1..<max(widest, 1) {
            let rotated = groups.map { $0[turn % $0.count] }
            let retried = validateOnce(chain, anchors: rotated, crls: crls, at: time, leafRole: leafRole)
            switch retried {
            case .trusted: return retried
            case .untrusted(let error) where reached == nil && (error.code == .certificateExpired || error.code == .certificateRevoked): reached = retried
            case .untrusted: break
            }
        }
        return reached ?? outcome
    }

    /// One validation.
    private static func validateOnce(
        _ chain: [X509Certificate], anchors: [X509Certificate], crls: [CertificateRevocationList], at time: Date,
        leafRole: String
    ) -> Outcome {
        guard let leaf = chain.first else {
            return .untrusted(WebAuthnError(.attestationUntrusted, "there is no certificate to validate"))
        }
        guard !anchors.isEmpty else {
            return .untrusted(WebAuthnError(.attestationUntrusted, "no trust anchor is configured for this authenticator"))
        }
        guard chain.count <= maxDepth else {
            return .untrusted(WebAuthnError(.attestationUntrusted, "the chain has \(chain.count) certificates; at most \(maxDepth) are accepted"))
        }
        guard let store = X509_STORE_new() else { return .untrusted(OpenSSL.failure("X509_STORE_new")) }
        defer { X509_STORE_free(store) }
        for anchor in anchors { X509_STORE_add_cert(store, anchor.x509) }  // the store takes its own reference
        for crl in crls { X509_STORE_add_crl(store, crl.crl) }
        OpenSSL.clearErrors()  // adding a duplicate anchor queues a harmless error
        guard let untrusted = webauthn_sk_X509_new_null() else { return .untrusted(OpenSSL.failure("sk_X509_new_null")) }
        defer { webauthn_sk_X509_free(untrusted) }  // the stack does not own the certificates
        for intermediate in chain.dropFirst() { _ = webauthn_sk_X509_push(untrusted, intermediate.x509) }
        guard let ctx = X509_STORE_CTX_new() else { return .untrusted(OpenSSL.failure("X509_STORE_CTX_new")) }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf.x509, untrusted) == 1 else { return .untrusted(OpenSSL.failure("X509_STORE_CTX_init")) }
        let param = X509_STORE_CTX_get0_param(ctx)
        X509_VERIFY_PARAM_set_time(param, timeT(time))
        X509_VERIFY_PARAM_set_depth(param, Int32(maxDepth))
        // OpenSSL's security level 2 (112 bits) for every key of the path and every signature but
        // the root's on itself: no RSA key under 2048 bits, no SHA-1 or MD5 signature. Without it a trusted root took an RSA
        // key of 512 bits and an MD5-signed intermediate (red team, round 26), the weaknesses the
        // engine refuses in credential keys.
        X509_VERIFY_PARAM_set_auth_level(param, Self.securityLevel)
        // Metadata may name an intermediate as the attestation root: every
        // configured anchor is trusted as such. CRLs are checked when given.
        var flags = UInt(X509_V_FLAG_PARTIAL_CHAIN)
        if !crls.isEmpty { flags |= UInt(X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL) }
        X509_VERIFY_PARAM_set_flags(param, flags)
        let ok = X509_verify_cert(ctx) == 1
        let code = X509_STORE_CTX_get_error(ctx)
        OpenSSL.clearErrors()
        guard ok else {
            let reason = String(cString: X509_verify_cert_error_string(Int(code)))
            let depth = X509_STORE_CTX_get_error_depth(ctx)
            let where_ = depth == 0 ? leafRole : "certificate \(depth) of the chain"
            switch code {
            case X509_V_ERR_CERT_HAS_EXPIRED, X509_V_ERR_CERT_NOT_YET_VALID:
                // The certificate's own bound, then the time it was checked at (the message gave
                // the check's time as if it were the expiry: red team, sixteenth pass).
                let iso = ISO8601DateFormatter()
                let current = X509_STORE_CTX_get_current_cert(ctx).flatMap { X509_up_ref($0) == 1 ? X509Certificate(taking: $0) : nil }
                let bound =
                    code == X509_V_ERR_CERT_HAS_EXPIRED
                    ? current?.notAfter.map { "expired at " + iso.string(from: $0) } : current?.notBefore.map { "is not valid before " + iso.string(from: $0) }
                return .untrusted(WebAuthnError(.certificateExpired, "\(where_) \(bound ?? reason); the time is \(iso.string(from: time))"))
            case X509_V_ERR_CERT_REVOKED:
                return .untrusted(WebAuthnError(.certificateRevoked, "\(where_) is revoked by its CRL"))
            default:
                return .untrusted(WebAuthnError(.attestationUntrusted, "the chain does not lead to a trusted root: \(where_): \(reason)"))
            }
        }
        var path: [X509Certificate] = []
        if let validated = X509_STORE_CTX_get0_chain(ctx) {
            for i in 0..<webauthn_sk_X509_num(validated) {
                guard let x = webauthn_sk_X509_value(validated, i), X509_up_ref(x) == 1 else { continue }
                path.append(X509Certificate(taking: x))
            }
        }
        return .trusted(path)
    }
}

extension CertificateChain {
    /// The verification time as `time_t`, clamped (a clock set past year
    /// 292 billion would otherwise trap the conversion).
    static func timeT(_ date: Date) -> time_t {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        if let exact = time_t(exactly: seconds) { return exact }
        return seconds < 0 ? time_t.min : time_t.max  // NaN cannot come from a Date
    }
}

extension X509Certificate {
    /// Verifies that `issuer`'s key signed this certificate.
    package func isSigned(by issuer: X509Certificate) -> Bool {
        guard let key = X509_get0_pubkey(issuer.x509) else { OpenSSL.clearErrors(); return false }
        defer { OpenSSL.clearErrors() }
        return X509_verify(x509, key) == 1
    }
}
