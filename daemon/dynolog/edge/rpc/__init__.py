"""The gRPC edge: the servicer, and the one module that converts between protobuf and the model."""
