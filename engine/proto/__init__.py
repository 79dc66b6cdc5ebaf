"""GE protobuf schemas (ge_ir.proto) and their generated Python modules."""
