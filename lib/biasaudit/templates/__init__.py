"""The template half (MLA-BiTe/LangBiTe): the library reader, machine versions, oracles, asking models, pass rates."""
