internal import COpenSSL
package import _WebAuthnEncoding

#if canImport(Glibc)
    import Glibc
#endif

/// A TLS client session (OpenSSL) over a connected, non-blocking socket the caller owns: the
/// package's fetches of Apple's endpoints and the FIDO metadata service. The peer is verified
/// against the system's roots (or `roots`, for a stand-in) and its name against `host`; TLS 1.2
/// at least. Each call does what OpenSSL can without blocking and says what it waits for.
package final class TLSClientSession {
    private let ssl: OpaquePointer
    private let context: OpaquePointer
    private let ownsContext: Bool

    /// What a handshake, read or write step came to.
    package enum Step {
        /// Done: bytes read or written (0 for a finished handshake).
        case done(Int)
        /// Call again once the socket is readable.
        case wantRead
        /// Call again once the socket is writable.
        case wantWrite
        /// The peer closed the session (a read's end of file).
        case closed
    }

    /// The context for the system's roots, made once: its settings never change.
    nonisolated(unsafe) private static let systemContext: OpaquePointer? = makeContext(roots: nil)

    private static func makeContext(roots: [X509Certificate]?) -> OpaquePointer? {
        guard let context = SSL_CTX_new(TLS_client_method()) else { return nil }
        // TLS 1.2 at least (SSL_CTX_set_min_proto_version is a macro).
        guard SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil) == 1 else {
            SSL_CTX_free(context)
            return nil
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let roots {
            guard let store = SSL_CTX_get_cert_store(context) else {
                SSL_CTX_free(context)
                return nil
            }
            for root in roots where X509_STORE_add_cert(store, root.x509) != 1 {
                SSL_CTX_free(context)
                return nil
            }
        } else if SSL_CTX_set_default_verify_paths(context) != 1 {
            SSL_CTX_free(context)
            return nil
        }
        return context
    }

    /// A session on `socket` for `host` (a name, or an IP address checked as one).
    ///
    /// - Parameter roots: the only roots to trust instead of the system's (tests' stand-ins).
    package init(socket: Int32, host: String, roots: [X509Certificate]? = nil) throws(WebAuthnError) {
        // OpenSSL writes to the socket with write(2): a peer gone away would raise SIGPIPE, which
        // kills a process that has not set it aside (NIO's servers do not need it: they use
        // MSG_NOSIGNAL). Ignored once, for the whole process.
        _ = Self.ignoreSIGPIPE
        let context: OpaquePointer?
        if let roots { context = Self.makeContext(roots: roots) } else { context = Self.systemContext }
        guard let context else { throw WebAuthnError(.cryptoFailure, "TLS context: \(Self.errorText())") }
        guard let ssl = SSL_new(context) else {
            if roots != nil { SSL_CTX_free(context) }
            throw WebAuthnError(.cryptoFailure, "TLS session: \(Self.errorText())")
        }
        self.ssl = ssl
        self.context = context
        self.ownsContext = roots != nil
        var address = in6_addr()
        let isIP = host.withCString { inet_pton(AF_INET, $0, &address) == 1 || inet_pton(AF_INET6, $0, &address) == 1 }
        let named: Bool
        if isIP {
            named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1
        } else {
            // The name to verify, and to send as SNI (SSL_set_tlsext_host_name is a macro).
            named =
                SSL_set1_host(ssl, host) == 1
                && host.withCString { SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0)) } == 1
        }
        guard named, SSL_set_fd(ssl, socket) == 1 else { throw WebAuthnError(.cryptoFailure, "TLS session for \(host.prefix(64)): \(Self.errorText())") }
    }

    deinit {
        SSL_free(ssl)
        if ownsContext { SSL_CTX_free(context) }
    }

    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// The handshake, the peer's chain and name verified.
    package func handshake() throws(WebAuthnError) -> Step {
        ERR_clear_error()
        let result = SSL_connect(ssl)
        if result == 1 {
            guard SSL_get_verify_result(ssl) == X509_V_OK else {
                throw WebAuthnError(.cryptoFailure, "the server's certificate did not verify")
            }
            return .done(0)
        }
        return try step(result, "TLS handshake")
    }

    /// Reads at most `buffer.count` bytes.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(WebAuthnError) -> Step {
        guard let base = buffer.baseAddress, let count = Int32(exactly: min(buffer.count, Int(Int32.max))) else { return .done(0) }
        ERR_clear_error()
        let result = SSL_read(ssl, base, count)
        if result > 0 { return .done(Int(result)) }
        return try step(result, "TLS read")
    }

    /// Writes at most `bytes.count` bytes.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(WebAuthnError) -> Step {
        guard let base = bytes.baseAddress, let count = Int32(exactly: min(bytes.count, Int(Int32.max))) else { return .done(0) }
        ERR_clear_error()
        let result = SSL_write(ssl, base, count)
        if result > 0 { return .done(Int(result)) }
        return try step(result, "TLS write")
    }

    private func step(_ result: Int32, _ what: String) throws(WebAuthnError) -> Step {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL where ERR_peek_error() == 0 && errno == 0: return .closed  // end of file without close_notify
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK, let reason = X509_verify_cert_error_string(Int(verify)) {
                throw WebAuthnError(.cryptoFailure, "\(what): the server's certificate did not verify (\(String(cString: reason)))")
            }
            throw WebAuthnError(.cryptoFailure, "\(what): \(Self.errorText())")
        }
    }

    private static func errorText() -> String {
        let code = ERR_get_error()
        guard code != 0 else { return "failed" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
