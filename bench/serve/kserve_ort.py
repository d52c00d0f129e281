"""The usual way people serve ONNX Runtime behind the Open Inference
Protocol: a KServe Python model server (kserve SDK) whose model runs an
ONNX Runtime InferenceSession. bench/serve/run.py starts it as kiln serve's
peer on the same ONNX file.

  python kserve_ort.py --model resnet50 --onnx model.onnx --threads 2 --http-port 8080 --grpc-port 8081
"""
import argparse

import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class OrtModel(Model):
    def __init__(self, name, path, threads):
        super().__init__(name)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.ready = True

    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        feeds = {i.name: i.as_numpy() for i in payload.inputs}
        results = self.session.run(None, feeds)
        outputs = []
        for meta, value in zip(self.session.get_outputs(), results):
            out = InferOutput(name=meta.name, shape=list(value.shape), datatype="FP32")
            out.set_data_from_numpy(np.ascontiguousarray(value, dtype=np.float32), binary_data=True)
            outputs.append(out)
        return InferResponse(response_id=payload.id, model_name=self.name, infer_outputs=outputs)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--onnx", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--http-port", type=int, default=8080)
    p.add_argument("--grpc-port", type=int, default=8081)
    a = p.parse_args()
    model = OrtModel(a.model, a.onnx, a.threads)
    ModelServer(http_port=a.http_port, grpc_port=a.grpc_port, enable_latency_logging=False).start([model])
