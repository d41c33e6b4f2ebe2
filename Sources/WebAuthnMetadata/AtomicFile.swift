internal import Foundation
internal import _WebAuthnCrypto
#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Writing a file so that readers see the old contents or the new, never a part: a new
/// temporary file in the same folder (created exclusively), written in full and synced,
/// then renamed over the old one.
enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func save(_ bytes: [UInt8], to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temporary = (directory as NSString).appendingPathComponent(".\(name).\(SecureRandom.bytes(8).map { String(format: "%02x", $0) }.joined()).tmp")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure(description: "cannot create \(temporary): errno \(errno)") }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress.map { $0 + written }, bytes.count - written)
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                close(fd)
                throw Failure(description: "cannot write \(temporary): errno \(errno)")
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw Failure(description: "cannot sync \(temporary): errno \(errno)")
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw Failure(description: "cannot rename \(temporary) to \(path): errno \(errno)") }
        renamed = true
        // The rename itself reaches the disk with the folder.
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }
}
