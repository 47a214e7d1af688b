from doctor_stub_scenario import SCENARIO


class _Matmul:
    allow_tf32 = True


class cuda:
    matmul = _Matmul()

    @staticmethod
    def is_built():
        # The real one says whether CUDA is compiled in, whatever torch.version.cuda names.
        return SCENARIO.get("cuda_built", SCENARIO["torch_cuda"] is not None)


class cudnn:
    allow_tf32 = True
