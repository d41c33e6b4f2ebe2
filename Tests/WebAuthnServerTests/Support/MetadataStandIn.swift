import COpenSSL
import Foundation
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto
#if canImport(Glibc)
    import Glibc
#endif

/// A stand-in for a FIDO metadata service on 127.0.0.1: plain HTTP, or HTTPS through OpenSSL's
/// server side (SSL_accept) under a test CA of its own. One thread accepts, one thread per
/// connection reads one GET and answers as the handler says: a response, a truncated body, or
/// nothing at all (a hanging server). Test code only: the engine itself fetches over URLSession.
final class MetadataStandIn: @unchecked Sendable {
    struct Request: Sendable {
        let path: String
        let headers: [(String, String)]
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    enum Answer: Sendable {
        /// A complete response.
        case respond(status: Int, headers: [(String, String)], body: [UInt8])
        /// A response that announces its whole body and closes after `sent` bytes of it.
        case truncated(body: [UInt8], sent: Int)
        /// No answer: the connection stays open until the stand-in stops (or 20 s pass).
        case hang
        /// A 200 whose body never ends, sent as fast as the client reads (20 s at most): delimited
        /// by the connection's end, or chunked in 64 KiB chunks.
        case endless(chunked: Bool)
        /// These bytes as they are (a malformed answer), then the connection's end.
        case raw([UInt8])

        static func blob(_ bytes: [UInt8], etag: String? = nil) -> Answer {
            .respond(status: 200, headers: [("Content-Type", "application/jwt")] + (etag.map { [("ETag", $0)] } ?? []), body: bytes)
        }
    }

    /// The stand-in's certificate and key, under a CA no system store knows.
    struct TLSIdentity: @unchecked Sendable {
        let certificate: X509Certificate
        let key: SigningKey
        let authority: X509Certificate

        static let loopback: TLSIdentity = {
            let caKey = try! SigningKey.generate(.es256)
            let ca = try! CertificateBuilder.certificateAuthority(organization: "metadata stand-in", name: "Metadata stand-in TLS CA")
                .build(key: caKey, issuer: nil, issuerKey: caKey)
            let key = try! SigningKey.generate(.es256)
            var leaf = CertificateBuilder(subject: [("CN", "127.0.0.1")])
            leaf.serial = 2
            // subjectAltName: iPAddress 127.0.0.1, dNSName localhost.
            let san: [UInt8] = [0x30, 0x11, 0x87, 0x04, 127, 0, 0, 1, 0x82, 0x09] + Array("localhost".utf8)
            leaf.extensions = [
                (X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse), (X509Certificate.OID.subjectAltName, false, san),
            ]
            return TLSIdentity(certificate: try! leaf.build(key: key, issuer: ca, issuerKey: caKey), key: key, authority: ca)
        }()
    }

    var port: Int { listener.port }
    var url: URL { URL(string: "\(context == nil ? "http" : "https")://127.0.0.1:\(port)/")! }
    private let listener: LoopbackListener
    private let context: OpaquePointer?
    private let state = Locked<[Request]>([])
    private let handler: @Sendable (Request) -> Answer

    /// The requests answered so far.
    var requests: [Request] { state.withLock { $0 } }
    private let sent = Locked(0)
    /// The body bytes ``Answer/endless(chunked:)`` answers got to send before the client stopped reading.
    var endlessBytesSent: Int { sent.withLock { $0 } }
    private var stopped: Bool { listener.isStopped }

    init(tls: TLSIdentity? = nil, handler: @escaping @Sendable (Request) -> Answer) throws {
        if let tls {
            guard let ctx = SSL_CTX_new(TLS_server_method()), SSL_CTX_use_certificate(ctx, tls.certificate.x509) == 1,
                SSL_CTX_use_PrivateKey(ctx, tls.key.pkey) == 1, SSL_CTX_check_private_key(ctx) == 1
            else { throw StandInError("cannot set up the TLS context") }
            context = ctx
        } else {
            context = nil
        }
        listener = try LoopbackListener()
        self.handler = handler
        listener.start { [self] connection in serve(connection) }
    }

    struct StandInError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func stop() { listener.stop() }

    deinit {
        stop()
        if let context { SSL_CTX_free(context) }
    }

    /// One connection: TLS handshake (if any), one request, one answer.
    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var ssl: OpaquePointer?
        if let context {
            guard let s = SSL_new(context) else { return }
            ssl = s
            SSL_set_fd(s, connection)
            // A client that refuses the certificate ends the handshake here.
            guard SSL_accept(s) == 1 else {
                ERR_clear_error()
                SSL_free(s)
                return
            }
        }
        defer {
            if let ssl {
                SSL_shutdown(ssl)
                SSL_free(ssl)
            }
        }
        func receive(_ buffer: inout [UInt8]) -> Int {
            buffer.withUnsafeMutableBytes { raw in
                if let ssl { return Int(SSL_read(ssl, raw.baseAddress, Int32(raw.count))) }
                return recv(connection, raw.baseAddress, raw.count, 0)
            }
        }
        @discardableResult func send(_ bytes: [UInt8]) -> Bool {
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { raw -> Int in
                    if let ssl { return Int(SSL_write(ssl, raw.baseAddress, Int32(raw.count))) }
                    return Glibc.send(connection, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL))
                }
                guard n > 0 else { return false }
                sent += n
            }
            return true
        }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !head.containsHeadEnd {
            let n = receive(&buffer)
            guard n > 0, head.count < 16 * 1024 else { return }
            head += buffer[0..<n]
        }
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count == 3 else { return }
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let request = Request(path: String(requestLine[1]), headers: headers)
        state.withLock { $0.append(request) }
        switch handler(request) {
        case .respond(let status, let extra, let body):
            send(Self.head(status: status, length: body.count, extra: extra) + body)
        case .truncated(let body, let sent):
            send(Self.head(status: 200, length: body.count, extra: []) + body.prefix(sent))
        case .hang:
            let until = Date().addingTimeInterval(20)
            while !stopped && Date() < until { Thread.sleep(forTimeInterval: 0.05) }
        case .raw(let bytes):
            send(bytes)
        case .endless(let chunked):
            var timeout = timeval(tv_sec: 2, tv_usec: 0)  // a client that stops reading ends it
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let coding = chunked ? "Transfer-Encoding: chunked\r\n" : ""
            guard send(Array("HTTP/1.1 200 OK\r\nContent-Type: application/jwt\r\n\(coding)Connection: close\r\n\r\n".utf8)) else { return }
            let piece = [UInt8](repeating: UInt8(ascii: "A"), count: 65_536)
            let frame = chunked ? Array("10000\r\n".utf8) + piece + Array("\r\n".utf8) : piece
            let until = Date().addingTimeInterval(20)
            while !stopped && Date() < until && send(frame) { sent.withLock { $0 += piece.count } }
        }
    }

    static func head(status: Int, length: Int, extra: [(String, String)]) -> [UInt8] {
        let reason = [200: "OK", 304: "Not Modified", 500: "Internal Server Error", 302: "Found"][status] ?? "Status"
        var text = "HTTP/1.1 \(status) \(reason)\r\nConnection: close\r\n"
        if status != 304 { text += "Content-Length: \(length)\r\n" }
        for (name, value) in extra { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8)
    }
}

extension [UInt8] {
    fileprivate var containsHeadEnd: Bool {
        guard count >= 4 else { return false }
        for i in 0...(count - 4) where self[i] == 13 && self[i + 1] == 10 && self[i + 2] == 13 && self[i + 3] == 10 { return true }
        return false
    }
}

/// A FIDO MDS3 BLOB signer with a PKI of its own, as the conformance runner builds one: a root,
/// an intermediate, a signing certificate, a second one the intermediate's CRL revokes, and
/// BLOBs naming the test attestation authority's model.
struct MDSTestPKI: @unchecked Sendable {
    let root: X509Certificate
    let intermediate: X509Certificate
    let signer: (certificate: X509Certificate, key: SigningKey)
    let revokedSigner: (certificate: X509Certificate, key: SigningKey)
    let crls: [CertificateRevocationList]
    let authority: AttestationAuthority
    let rootKey: SigningKey
    let intermediateKey: SigningKey

    static let shared = try! MDSTestPKI()
    static let aaguid = AAGUID(bytes: [UInt8](repeating: 0x3d, count: 16))!

    init() throws {
        let rootKey = try SigningKey.generate(.es256), intermediateKey = try SigningKey.generate(.es256)
        var rootBuilder = CertificateBuilder.certificateAuthority(organization: "metadata stand-in", name: "MDS test root")
        rootBuilder.serial = 1
        let root = try rootBuilder.build(key: rootKey, issuer: nil, issuerKey: rootKey)
        var intermediateBuilder = CertificateBuilder.certificateAuthority(organization: "metadata stand-in", name: "MDS test intermediate")
        intermediateBuilder.serial = 11
        let intermediate = try intermediateBuilder.build(key: intermediateKey, issuer: root, issuerKey: rootKey)
        func issueSigner(_ serial: UInt64) throws -> (certificate: X509Certificate, key: SigningKey) {
            let key = try SigningKey.generate(.rs256)
            var b = CertificateBuilder(subject: [("C", "AA"), ("O", "metadata stand-in"), ("CN", "MDS BLOB signer \(serial)")])
            b.serial = serial
            b.extensions = [(X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse)]
            return (try b.build(key: key, issuer: intermediate, issuerKey: intermediateKey), key)
        }
        self.root = root
        self.intermediate = intermediate
        self.rootKey = rootKey
        self.intermediateKey = intermediateKey
        signer = try issueSigner(21)
        revokedSigner = try issueSigner(22)
        crls = [
            try CertificateRevocationList(derOrPEM: CRLBuilder().build(issuer: root, issuerKey: rootKey)),
            try CertificateRevocationList(derOrPEM: CRLBuilder(revoking: [22]).build(issuer: intermediate, issuerKey: intermediateKey)),
        ]
        authority = try AttestationAuthority.generate()
    }

    /// CRLs of the root and the intermediate, the intermediate's revoking `serials` and valid until `nextUpdate`.
    func crls(revoking serials: [UInt64], nextUpdate: Date) throws -> [CertificateRevocationList] {
        var intermediateCRL = CRLBuilder(revoking: serials)
        intermediateCRL.nextUpdate = nextUpdate
        return [
            try CertificateRevocationList(derOrPEM: CRLBuilder().build(issuer: root, issuerKey: rootKey)),
            try CertificateRevocationList(derOrPEM: intermediateCRL.build(issuer: intermediate, issuerKey: intermediateKey)),
        ]
    }

    /// The verification the service is configured with: this root, these CRLs.
    var options: FIDOMetadata.BLOBOptions { FIDOMetadata.BLOBOptions(x509Roots: [root], crls: crls) }

    /// A BLOB numbered `no`, naming the test authority's model with `status` (dated `effective`).
    func blob(
        no: Int, nextUpdate: String = "2099-01-01", status: String = "FIDO_CERTIFIED_L1", effective: String = "2024-01-01", description: String? = nil,
        revoked: Bool = false,
        badSignature: Bool = false, signedBy other: (certificate: X509Certificate, key: SigningKey)? = nil
    ) throws -> [UInt8] {
        let payload: JSONValue = [
            "legalHeader": "metadata stand-in test BLOB; not FIDO's", "no": .number(Double(no)), "nextUpdate": .string(nextUpdate),
            "entries": [
                [
                    "aaguid": .string(Self.aaguid.description),
                    "metadataStatement": authority.metadataStatement(aaguid: Self.aaguid, description: description ?? "stand-in key \(no)"),
                    "statusReports": [["status": .string(status), "effectiveDate": .string(effective)]],
                ]
            ],
        ]
        let (certificate, key) = other ?? (revoked ? revokedSigner : signer)
        var jws = try JWSWriter.compact(payload, key: key, x5c: [certificate, intermediate], type: "JWT")
        if badSignature { jws[jws.count - 5] = jws[jws.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A") }
        return jws
    }
}
