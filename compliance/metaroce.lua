-- SPDX-License-Identifier: GPL-2.0
-- Wireshark dissector for MetaRoCE draft v0 (UDP port 4793), from the tables of
-- Documentation/metaroce/spec.rst ("Framing over UDP/IP"), as compliance/mrwire.py.
--
--   tshark -X lua_script:compliance/metaroce.lua -r capture.pcap -Y metaroce
--   wireshark -X lua_script:compliance/metaroce.lua capture.pcap
-- or copy it to ~/.local/lib/wireshark/plugins/ to load it always.

local p = Proto("metaroce", "MetaRoCE draft v0")

local TYPES = {
    [0x01] = "SEND", [0x02] = "SEND_IMM", [0x03] = "WRITE", [0x04] = "WRITE_IMM",
    [0x05] = "READ_REQ", [0x06] = "READ_RESP", [0x07] = "CMP_SWAP", [0x08] = "FETCH_ADD",
    [0x09] = "ATOMIC_RESP", [0x10] = "ACK", [0x11] = "NAK", [0x12] = "CONTROL",
    [0x20] = "UD", [0x21] = "UD_IMM",
}
-- Header length per data type ([MR-WIRE-11]).
local DATA_LEN = { [1] = 40, [2] = 44, [3] = 48, [4] = 56, [5] = 48, [6] = 40, [7] = 60,
    [8] = 60, [9] = 44 }
local NAK_CODES = { [1] = "RNR", [2] = "ACCESS_ERROR", [3] = "INVALID_REQUEST",
    [4] = "REMOTE_OP_ERROR" }
local STATUS = { [0] = "OK", [2] = "ACCESS_ERROR", [3] = "INVALID_REQUEST",
    [4] = "REMOTE_OP_ERROR" }
local CONTROL_CODES = { [1] = "OPEN", [2] = "CLOSE", [3] = "PATH_FLOOR" }

local f = p.fields
f.version = ProtoField.uint8("metaroce.version", "Version", base.HEX)
f.type = ProtoField.uint8("metaroce.type", "Type", base.HEX, TYPES)
f.flags = ProtoField.uint8("metaroce.flags", "Flags", base.HEX)
f.f_first = ProtoField.bool("metaroce.flags.first", "FIRST", 8, nil, 0x01)
f.f_last = ProtoField.bool("metaroce.flags.last", "LAST", 8, nil, 0x02)
f.f_open = ProtoField.bool("metaroce.flags.open", "OPEN", 8, nil, 0x04)
f.f_ackreq = ProtoField.bool("metaroce.flags.ack_req", "ACK_REQ", 8, nil, 0x08)
f.f_solicited = ProtoField.bool("metaroce.flags.solicited", "SOLICITED", 8, nil, 0x10)
f.path = ProtoField.uint8("metaroce.path", "Path", base.DEC)
f.dst_conn = ProtoField.uint32("metaroce.dst_conn", "Destination connection", base.HEX)
f.src_conn = ProtoField.uint32("metaroce.src_conn", "Source connection", base.HEX)
f.psn = ProtoField.uint32("metaroce.psn", "PSN", base.HEX)
-- stream header
f.qpn = ProtoField.uint32("metaroce.qpn", "QPN", base.HEX)
f.msn = ProtoField.uint32("metaroce.msn", "MSN", base.HEX)
f.ssn = ProtoField.uint32("metaroce.ssn", "SSN", base.HEX)
f.offset = ProtoField.uint32("metaroce.offset", "Offset", base.DEC)
-- type extensions
f.rsn = ProtoField.uint32("metaroce.rsn", "RSN", base.DEC)
f.total_len = ProtoField.uint32("metaroce.total_len", "Total length", base.DEC)
f.imm = ProtoField.uint32("metaroce.imm", "Immediate", base.HEX)
f.rkey = ProtoField.uint32("metaroce.rkey", "rkey", base.HEX)
f.va = ProtoField.uint64("metaroce.va", "Virtual address", base.HEX)
f.len = ProtoField.uint32("metaroce.len", "Length", base.DEC)
f.status = ProtoField.uint8("metaroce.status", "Status", base.DEC, STATUS)
f.compare_add = ProtoField.uint64("metaroce.compare_add", "Compare / add", base.HEX)
f.swap = ProtoField.uint64("metaroce.swap", "Swap", base.HEX)
f.orig = ProtoField.uint64("metaroce.orig", "Original value", base.HEX)
f.payload = ProtoField.bytes("metaroce.payload", "Payload")
f.payload_len = ProtoField.uint32("metaroce.payload_len", "Payload length", base.DEC)
-- ACK
f.rate_hint = ProtoField.uint32("metaroce.ack.rate_hint", "Rate hint (Mbit/s)", base.DEC)
f.ack_delay = ProtoField.uint16("metaroce.ack.delay", "ACK delay (us)", base.DEC)
f.count = ProtoField.uint8("metaroce.ack.count", "Path blocks", base.DEC)
f.b_path = ProtoField.uint8("metaroce.ack.path", "Block path", base.DEC)
f.b_dup = ProtoField.uint8("metaroce.ack.dup_count", "Duplicates", base.DEC)
f.b_ce = ProtoField.uint16("metaroce.ack.ce_count", "CE count", base.DEC)
f.b_cum = ProtoField.uint32("metaroce.ack.cum_psn", "Cumulative PSN", base.HEX)
f.b_sack = ProtoField.bytes("metaroce.ack.sack", "SACK bitmap")
f.b_sacked = ProtoField.string("metaroce.ack.sacked", "SACKed offsets")
-- NAK
f.n_path = ProtoField.uint8("metaroce.nak.path", "Path", base.DEC)
f.n_code = ProtoField.uint8("metaroce.nak.code", "Code", base.DEC, NAK_CODES)
f.n_rnr = ProtoField.uint8("metaroce.nak.rnr_timer", "RNR timer (10 us)", base.DEC)
f.n_psn = ProtoField.uint32("metaroce.nak.psn", "PSN", base.HEX)
-- CONTROL
f.c_code = ProtoField.uint8("metaroce.control.code", "Code", base.DEC, CONTROL_CODES)
f.c_path = ProtoField.uint8("metaroce.control.path", "Path", base.DEC)
f.c_value = ProtoField.uint32("metaroce.control.value", "Value", base.HEX)
-- UD
f.dst_qpn = ProtoField.uint32("metaroce.ud.dst_qpn", "Destination QPN", base.HEX)
f.src_qpn = ProtoField.uint32("metaroce.ud.src_qpn", "Source QPN", base.HEX)
f.qkey = ProtoField.uint32("metaroce.ud.qkey", "Q_Key", base.HEX)

local e_short = ProtoExpert.new("metaroce.short", "Shorter than its type's header",
    expert.group.MALFORMED, expert.severity.ERROR)
local e_type = ProtoExpert.new("metaroce.unknown_type", "Reserved packet type",
    expert.group.MALFORMED, expert.severity.WARN)
p.experts = { e_short, e_type }

-- The SACK bitmap: bit i is bit i mod 8 of byte i div 8, LSB first ([MR-WIRE-14]).
local function sacked(tvb)
    local out = {}
    for i = 0, 255 do
        local byte = tvb:range(math.floor(i / 8), 1):uint()
        if bit.band(bit.rshift(byte, i % 8), 1) == 1 then
            out[#out + 1] = tostring(i)
        end
    end
    if #out == 0 then return "-" end
    return table.concat(out, " ")
end

local function data_ext(t, buf, tree)
    local e = tree:add(p, buf(32, DATA_LEN[t] - 32), "Type extension")
    if t == 1 or t == 2 then
        e:add(f.rsn, buf(32, 4)); e:add(f.total_len, buf(36, 4))
        if t == 2 then e:add(f.imm, buf(40, 4)) end
    elseif t == 3 or t == 4 then
        e:add(f.rkey, buf(32, 4)); e:add(f.va, buf(36, 8)); e:add(f.total_len, buf(44, 4))
        if t == 4 then e:add(f.rsn, buf(48, 4)); e:add(f.imm, buf(52, 4)) end
    elseif t == 5 then
        e:add(f.rkey, buf(32, 4)); e:add(f.va, buf(36, 8)); e:add(f.len, buf(44, 4))
    elseif t == 6 then
        e:add(f.total_len, buf(32, 4)); e:add(f.status, buf(36, 1))
    elseif t == 7 or t == 8 then
        e:add(f.rkey, buf(32, 4)); e:add(f.va, buf(36, 8)); e:add(f.compare_add, buf(44, 8))
        e:add(f.swap, buf(52, 8))
    elseif t == 9 then
        e:add(f.orig, buf(32, 8)); e:add(f.status, buf(40, 1))
    end
end

function p.dissector(buf, pinfo, tree)
    local n = buf:len()
    if n < 16 or buf(0, 1):uint() ~= 0xD0 then
        return 0
    end
    pinfo.cols.protocol = "MetaRoCE"
    local t = buf(1, 1):uint()
    local name = TYPES[t] or string.format("0x%02x", t)
    local root = tree:add(p, buf(), "MetaRoCE " .. name)
    root:add(f.version, buf(0, 1))
    root:add(f.type, buf(1, 1))
    local fl = root:add(f.flags, buf(2, 1))
    fl:add(f.f_first, buf(2, 1)); fl:add(f.f_last, buf(2, 1)); fl:add(f.f_open, buf(2, 1))
    fl:add(f.f_ackreq, buf(2, 1)); fl:add(f.f_solicited, buf(2, 1))
    root:add(f.path, buf(3, 1))
    root:add(f.dst_conn, buf(4, 4))
    root:add(f.src_conn, buf(8, 4))
    root:add(f.psn, buf(12, 4))
    local info = name
    if DATA_LEN[t] then
        if n < DATA_LEN[t] then
            root:add_proto_expert_info(e_short)
            return n
        end
        local s = root:add(p, buf(16, 16), "Stream header")
        s:add(f.qpn, buf(16, 4)); s:add(f.msn, buf(20, 4)); s:add(f.ssn, buf(24, 4))
        s:add(f.offset, buf(28, 4))
        data_ext(t, buf, root)
        local pl = n - DATA_LEN[t]
        root:add(f.payload_len, pl)
        if pl > 0 then root:add(f.payload, buf(DATA_LEN[t], pl)) end
        info = string.format("%s path=%d psn=%08x qpn=%x msn=%08x ssn=%08x off=%d len=%d", name,
            buf(3, 1):uint(), buf(12, 4):uint(), buf(16, 4):uint(), buf(20, 4):uint(),
            buf(24, 4):uint(), buf(28, 4):uint(), pl)
    elseif t == 0x10 then
        if n < 24 then root:add_proto_expert_info(e_short); return n end
        root:add(f.rate_hint, buf(16, 4)); root:add(f.ack_delay, buf(20, 2))
        local count = buf(22, 1):uint()
        root:add(f.count, buf(22, 1))
        local parts = {}
        for i = 0, count - 1 do
            local o = 24 + 40 * i
            if o + 40 > n then root:add_proto_expert_info(e_short); break end
            local b = root:add(p, buf(o, 40), "Path block " .. buf(o, 1):uint())
            b:add(f.b_path, buf(o, 1)); b:add(f.b_dup, buf(o + 1, 1)); b:add(f.b_ce, buf(o + 2, 2))
            b:add(f.b_cum, buf(o + 4, 4)); b:add(f.b_sack, buf(o + 8, 32))
            b:add(f.b_sacked, sacked(buf(o + 8, 32):tvb()))
            parts[#parts + 1] = string.format("p%d:%08x", buf(o, 1):uint(), buf(o + 4, 4):uint())
        end
        info = "ACK " .. table.concat(parts, " ")
    elseif t == 0x11 then
        if n < 36 then root:add_proto_expert_info(e_short); return n end
        root:add(f.n_path, buf(16, 1)); root:add(f.n_code, buf(17, 1)); root:add(f.n_rnr, buf(18, 1))
        root:add(f.n_psn, buf(20, 4)); root:add(f.qpn, buf(24, 4)); root:add(f.msn, buf(28, 4))
        root:add(f.ssn, buf(32, 4))
        info = string.format("NAK %s psn=%08x", NAK_CODES[buf(17, 1):uint()] or "?", buf(20, 4):uint())
    elseif t == 0x12 then
        if n < 24 then root:add_proto_expert_info(e_short); return n end
        root:add(f.c_code, buf(16, 1)); root:add(f.c_path, buf(17, 1)); root:add(f.c_value, buf(20, 4))
        info = "CONTROL " .. (CONTROL_CODES[buf(16, 1):uint()] or "?")
    elseif t == 0x20 or t == 0x21 then
        local hl = t == 0x20 and 28 or 32
        if n < hl then root:add_proto_expert_info(e_short); return n end
        root:add(f.dst_qpn, buf(16, 4)); root:add(f.src_qpn, buf(20, 4)); root:add(f.qkey, buf(24, 4))
        if t == 0x21 then root:add(f.imm, buf(28, 4)) end
        root:add(f.payload_len, n - hl)
    else
        root:add_proto_expert_info(e_type)
    end
    pinfo.cols.info = info
    return n
end

DissectorTable.get("udp.port"):add(4793, p)
